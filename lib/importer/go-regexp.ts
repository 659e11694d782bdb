/**
 * Go's regexp (RE2 syntax) as the operators import reads evaluate it, matched in time linear in the text: Stakater
 * Reloader compiles each `secret.reloader.stakater.com/reload` name as `^name$`, ESO each ClusterSecretStore
 * `namespaceRegexes` entry as an unanchored search. Both come from objects a tenant may write, and a JavaScript RegExp
 * backtracks (`(a*)*b`, `.*.*.*.*x` take exponential or polynomial time), so they are never handed to one: the
 * pattern is compiled to a Thompson NFA and simulated one text position at a time, each instruction visited at most
 * once per position, so a match costs at most 2 × (text length + 1) × program size steps, whatever the pattern.
 *
 * The subset read is what names and namespace regexes use: literals, `.`, `[...]` classes (ranges, negation, `\d \w
 * \s` and their negations), `^`, `$`, groups `( )`, `(?: )`, `(?P<n> )`, `(?<n> )`, `|`, and `* + ? {n} {n,} {n,m}`
 * (each optionally lazy: the same yes/no answer). Anything else Go accepts (flags such as `(?i)`, `\b`, `\pL`, `\Q…\E`,
 * POSIX classes) is refused with a reason rather than guessed, as is a pattern longer than GO_REGEXP_LIMITS.length or
 * one that compiles to more than GO_REGEXP_LIMITS.instructions (`(a{1000}){1000}`).
 */

export const GO_REGEXP_LIMITS = {
  /** Characters in a pattern. */
  length: 1024,
  /** NFA instructions after `{n,m}` is unrolled: the factor of every match's cost. */
  instructions: 4096,
  /** Go's own cap on a repetition count. */
  repeat: 1000,
} as const;

/** Inclusive code point ranges, flat: [lo0, hi0, lo1, hi1, ...]. */
interface CharSet {
  ranges: number[];
  negated: boolean;
}

type Node =
  | { type: 'empty' }
  | { type: 'char'; set: CharSet }
  | { type: 'bol' }
  | { type: 'eol' }
  | { type: 'concat'; items: Node[] }
  | { type: 'alternate'; items: Node[] }
  | { type: 'repeat'; node: Node; min: number; max: number | undefined };

type Instruction =
  | { op: 'char'; set: CharSet; next: number }
  | { op: 'split'; a: number; b: number }
  | { op: 'bol'; next: number }
  | { op: 'eol'; next: number }
  | { op: 'match' };

/** Counts the work of a match (instruction visits), so a test can bound it without a clock. */
export interface StepMeter {
  steps: number;
}

export interface GoRegexp {
  /** Instructions in the program: a match costs at most 2 × (text length + 1) × size steps. */
  readonly size: number;
  /** Go's `MatchString`: does the pattern match anywhere in the text? */
  test(text: string, meter?: StepMeter): boolean;
}

class GoRegexpError extends Error {
  override readonly name = 'GoRegexpError';
}

const range = (lo: string, hi: string = lo): number[] => [lo.codePointAt(0) ?? 0, hi.codePointAt(0) ?? 0];
const PERL_CLASSES: Readonly<Record<string, number[]>> = {
  d: range('0', '9'),
  s: [...range('\t', '\n'), ...range('\f', '\r'), ...range(' ')],
  w: [...range('0', '9'), ...range('A', 'Z'), ...range('_'), ...range('a', 'z')],
};
const CONTROL_ESCAPES: Readonly<Record<string, string>> = { a: '\x07', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };
const PUNCTUATION = /^[!-/:-@[-`{-~]$/;
const ANY_BUT_NEWLINE: CharSet = { ranges: range('\n'), negated: true };

/** Recursive descent over Go's syntax (regexp/syntax with the Perl flags regexp.Compile uses). */
class Parser {
  readonly #chars: string[];
  #at = 0;
  #depth = 0;

  constructor(source: string) {
    this.#chars = Array.from(source);
  }

  parse(): Node {
    const node = this.#alternation();
    if (this.#at < this.#chars.length) throw new GoRegexpError(`unexpected ) at ${this.#at}`);
    return node;
  }

  #peek(offset = 0): string | undefined {
    return this.#chars[this.#at + offset];
  }

  #alternation(): Node {
    const items = [this.#concatenation()];
    while (this.#peek() === '|') {
      this.#at++;
      items.push(this.#concatenation());
    }
    return items.length === 1 ? (items[0] as Node) : { type: 'alternate', items };
  }

  #concatenation(): Node {
    const items: Node[] = [];
    // Go refuses a repetition operator right after another (`a**`, `a*??`); `(a*)*` is a group, not that.
    let quantified = false;
    for (let c = this.#peek(); c !== undefined && c !== '|' && c !== ')'; c = this.#peek()) {
      const quantifier = this.#quantifier();
      if (!quantifier) {
        items.push(this.#atom());
        quantified = false;
        continue;
      }
      const last = items.pop();
      if (last === undefined) throw new GoRegexpError(`missing argument to repetition operator at ${this.#at}`);
      if (quantified) throw new GoRegexpError(`invalid nested repetition operator at ${this.#at}`);
      this.#at += quantifier.length;
      if (this.#peek() === '?') this.#at++; // lazy: the same yes/no answer
      items.push({ type: 'repeat', node: last, min: quantifier.min, max: quantifier.max });
      quantified = true;
    }
    return items.length === 0 ? { type: 'empty' } : items.length === 1 ? (items[0] as Node) : { type: 'concat', items };
  }

  /** The quantifier at the cursor, without consuming it; `{` that is not a valid count is a literal, as in Go. */
  #quantifier(): { length: number; min: number; max: number | undefined } | undefined {
    const c = this.#peek();
    if (c === '*') return { length: 1, min: 0, max: undefined };
    if (c === '+') return { length: 1, min: 1, max: undefined };
    if (c === '?') return { length: 1, min: 0, max: 1 };
    if (c !== '{') return undefined;
    const rest = this.#chars.slice(this.#at, this.#at + 16).join('');
    const m = /^\{(\d+)(,(\d*))?\}/.exec(rest);
    if (!m) return undefined;
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === '' ? undefined : Number(m[3]);
    if (min > GO_REGEXP_LIMITS.repeat || (max ?? 0) > GO_REGEXP_LIMITS.repeat || (max !== undefined && max < min)) throw new GoRegexpError(`invalid repeat count ${m[0]}`);
    return { length: m[0].length, min, max };
  }

  #atom(): Node {
    const c = this.#peek() as string;
    this.#at++;
    switch (c) {
      case '.':
        return { type: 'char', set: ANY_BUT_NEWLINE };
      case '^':
        return { type: 'bol' };
      case '$':
        return { type: 'eol' };
      case '[':
        return { type: 'char', set: this.#class() };
      case '\\':
        return { type: 'char', set: this.#escape(false) };
      case '(':
        return this.#group();
      default:
        return { type: 'char', set: { ranges: range(c), negated: false } };
    }
  }

  #group(): Node {
    if (this.#peek() === '?') {
      const head = this.#chars.slice(this.#at, this.#at + 3).join('');
      if (head.startsWith('?:')) this.#at += 2;
      else if (head === '?P<' || head.startsWith('?<')) {
        const close = this.#chars.indexOf('>', this.#at);
        const name = close < 0 ? '' : this.#chars.slice(this.#at + (head === '?P<' ? 3 : 2), close).join('');
        if (!/^[A-Za-z0-9_]+$/.test(name)) throw new GoRegexpError(`invalid named capture at ${this.#at}`);
        this.#at = close + 1;
      } else throw new GoRegexpError(`flags and other (? groups are not evaluated (at ${this.#at})`);
    }
    if (++this.#depth > 100) throw new GoRegexpError('groups nest deeper than 100');
    const node = this.#alternation();
    this.#depth--;
    if (this.#peek() !== ')') throw new GoRegexpError('missing closing )');
    this.#at++;
    return node;
  }

  /** After `\`: a Perl class, a control escape or escaped punctuation; anything else Go reads is not evaluated. */
  #escape(inClass: boolean): CharSet {
    const c = this.#peek();
    if (c === undefined) throw new GoRegexpError('trailing backslash');
    this.#at++;
    const perl = PERL_CLASSES[c.toLowerCase()];
    if (perl) return { ranges: perl, negated: c !== c.toLowerCase() };
    const control = CONTROL_ESCAPES[c];
    if (control !== undefined) return { ranges: range(control), negated: false };
    if (PUNCTUATION.test(c)) return { ranges: range(c), negated: false };
    throw new GoRegexpError(`the escape \\${c}${inClass ? ' in a class' : ''} is not evaluated`);
  }

  #class(): CharSet {
    let negated = false;
    if (this.#peek() === '^') {
      negated = true;
      this.#at++;
    }
    const ranges: number[] = [];
    let first = true;
    for (;;) {
      const c = this.#peek();
      if (c === undefined) throw new GoRegexpError('missing closing ]');
      if (c === ']' && !first) break;
      first = false;
      if (c === '[' && this.#peek(1) === ':') throw new GoRegexpError('POSIX classes [:name:] are not evaluated');
      const lo = this.#classChar();
      if (lo.negated || lo.ranges.length > 2) {
        // \d, \W ...: a set, never a range end. A negated one inside a class is not evaluated.
        if (lo.negated) throw new GoRegexpError('a negated Perl class inside [ ] is not evaluated');
        ranges.push(...lo.ranges);
        continue;
      }
      if (this.#peek() === '-' && this.#peek(1) !== ']' && this.#peek(1) !== undefined) {
        this.#at++;
        const hi = this.#classChar();
        if (hi.negated || hi.ranges.length > 2 || (hi.ranges[0] ?? 0) < (lo.ranges[0] ?? 0)) throw new GoRegexpError('invalid character class range');
        ranges.push(lo.ranges[0] ?? 0, hi.ranges[0] ?? 0);
      } else ranges.push(...lo.ranges);
    }
    this.#at++;
    return { ranges, negated };
  }

  #classChar(): CharSet {
    const c = this.#peek() as string;
    this.#at++;
    return c === '\\' ? this.#escape(true) : { ranges: range(c), negated: false };
  }
}

/** Compiles the tree backwards: each node is emitted knowing where it continues, so no patch lists are needed. */
function compile(root: Node): { program: Instruction[]; start: number } {
  const program: Instruction[] = [{ op: 'match' }];
  const emit = (instruction: Instruction): number => {
    if (program.length >= GO_REGEXP_LIMITS.instructions) throw new GoRegexpError(`the pattern compiles to more than ${GO_REGEXP_LIMITS.instructions} instructions`);
    program.push(instruction);
    return program.length - 1;
  };
  const star = (node: Node, next: number): number => {
    const loop = emit({ op: 'split', a: -1, b: next });
    (program[loop] as { a: number }).a = build(node, loop);
    return loop;
  };
  const build = (node: Node, next: number): number => {
    switch (node.type) {
      case 'empty':
        return next;
      case 'char':
        return emit({ op: 'char', set: node.set, next });
      case 'bol':
        return emit({ op: 'bol', next });
      case 'eol':
        return emit({ op: 'eol', next });
      case 'concat':
        return node.items.reduceRight((at, item) => build(item, at), next);
      case 'alternate':
        return node.items.slice(0, -1).reduceRight((rest, item) => emit({ op: 'split', a: build(item, next), b: rest }), build(node.items.at(-1) as Node, next));
      case 'repeat': {
        // x{min,max}: min copies, then max − min optional copies nested (x(x(x)?)?)?, or a loop when unbounded.
        let at = node.max === undefined ? star(node.node, next) : next;
        if (node.max !== undefined) for (let i = node.min; i < node.max; i++) at = emit({ op: 'split', a: build(node.node, at), b: next });
        for (let i = 0; i < node.min; i++) at = build(node.node, at);
        return at;
      }
    }
  };
  return { program, start: build(root, 0) };
}

const inSet = (set: CharSet, c: number): boolean => {
  let found = false;
  for (let i = 0; i < set.ranges.length && !found; i += 2) found = c >= (set.ranges[i] ?? 0) && c <= (set.ranges[i + 1] ?? -1);
  return found !== set.negated;
};

/** Go's regexp.Compile(source), or why it is not evaluated here (not valid Go, or outside the subset above). */
export function compileGoRegexp(source: string): GoRegexp | { error: string } {
  if (source.length > GO_REGEXP_LIMITS.length) return { error: `the pattern is longer than ${GO_REGEXP_LIMITS.length} characters` };
  let compiled: { program: Instruction[]; start: number };
  try {
    compiled = compile(new Parser(source).parse());
  } catch (e) {
    if (e instanceof GoRegexpError) return { error: e.message };
    throw e;
  }
  const { program, start } = compiled;
  return {
    size: program.length,
    test(text: string, meter?: StepMeter): boolean {
      const chars = Array.from(text, (c) => c.codePointAt(0) ?? 0);
      const n = chars.length;
      // visitedAt[pc] = the text position at which pc was last added: each pc once per position.
      const visitedAt = new Int32Array(program.length).fill(-1);
      let matched = false;
      let steps = 0;
      const stack: number[] = [];
      const add = (list: number[], pc: number, pos: number) => {
        stack.push(pc);
        while (stack.length > 0) {
          const at = stack.pop() as number;
          if (visitedAt[at] === pos) continue;
          visitedAt[at] = pos;
          steps++;
          const ins = program[at] as Instruction;
          if (ins.op === 'split') stack.push(ins.b, ins.a);
          else if (ins.op === 'bol') {
            if (pos === 0) stack.push(ins.next);
          } else if (ins.op === 'eol') {
            if (pos === n) stack.push(ins.next);
          } else if (ins.op === 'match') matched = true;
          else list.push(at);
        }
      };
      let threads: number[] = [];
      for (let pos = 0; pos <= n && !matched; pos++) {
        // An unanchored search: a new thread starts at every position.
        add(threads, start, pos);
        if (matched || pos === n) break;
        const c = chars[pos] as number;
        const next: number[] = [];
        for (const pc of threads) {
          steps++;
          const ins = program[pc] as Extract<Instruction, { op: 'char' }>;
          if (inSet(ins.set, c)) add(next, ins.next, pos + 1);
        }
        threads = next;
      }
      if (meter) meter.steps += steps;
      return matched;
    },
  };
}
