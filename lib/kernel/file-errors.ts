/**
 * A file error in words: `routes.yaml: no such file`, never a bare ENOENT. One table for every place that reads or
 * writes a file, so the CLI, the relay and the stores say the same thing about the same failure.
 */
const WORDS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  EEXIST: 'already exists',
  ENOSPC: 'no space left on the device',
  EROFS: 'read-only file system',
  EMFILE: 'too many open files',
  ENFILE: 'too many open files',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'the name is too long',
  EBUSY: 'busy',
  EIO: 'input/output error',
  ENXIO: 'no such device',
};

/** The words for an errno code, or undefined for a code this table does not know (or none). */
export function errnoWords(code: string | undefined): string | undefined {
  return code !== undefined && Object.hasOwn(WORDS, code) ? WORDS[code] : undefined;
}

/** `FILE: words` for an error thrown by a file operation; an error without a known code keeps its own message. */
export function fileErrorText(file: string, e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const words = errnoWords(code);
  if (words !== undefined) return `${file}: ${words}`;
  const message = e instanceof Error ? e.message : String(e);
  return `${file}: ${message}`;
}
