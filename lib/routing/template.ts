/**
 * `{name}` placeholders in route targets. Values are substituted once and never re-read, so a secret key that
 * itself contains "{x}" stays literal text (no template injection from Vault paths).
 */

const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** Placeholders every patch template may use besides the route's captures. */
export const BUILTIN_PLACEHOLDERS = ['version', 'path', 'key', 'mount', 'vaultNamespace', 'operation'] as const;

export function placeholders(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].map((m) => m[1] ?? '');
}

export function render(template: string, values: Readonly<Record<string, string>>): string {
  // Most names and namespaces are plain text: no regex scan for those.
  if (template.indexOf('{') < 0) return template;
  return template.replace(PLACEHOLDER, (whole, name: string) => values[name] ?? whole);
}

/** Every string inside a JSON-like value (for patch templates). */
export function* stringsIn(value: unknown): Generator<string> {
  if (typeof value === 'string') yield value;
  else if (Array.isArray(value)) for (const v of value) yield* stringsIn(v);
  else if (typeof value === 'object' && value !== null)
    for (const [k, v] of Object.entries(value)) {
      yield k;
      yield* stringsIn(v);
    }
}

export function renderDeep(value: unknown, values: Readonly<Record<string, string>>): unknown {
  if (typeof value === 'string') return render(value, values);
  if (Array.isArray(value)) return value.map((v) => renderDeep(v, values));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [render(k, values), renderDeep(v, values)]));
  }
  return value;
}
