/**
 * ETags of plants (RFC 9110 §8.8.3): the plant's version, quoted — strong and opaque to clients.
 * A version is never given twice in a store, so an ETag changes with every change and a plant
 * re-created under a deleted one's id never repeats one.
 */
export const etagOf = (version: number): string => `"${version}"`;

/**
 * What an If-Match or If-None-Match header asks for: any current plant (`*`), or the versions its
 * strong ETags name. Weak ETags (`W/"…"`), which a strong comparison never matches, and anything
 * that is not an ETag of ours are ignored; a header naming none of ours matches nothing.
 */
export function parseEtags(header: string): '*' | number[] {
  if (header.trim() === '*') return '*';
  const versions: number[] = [];
  for (const part of header.split(',')) {
    const m = /^"([1-9][0-9]{0,15})"$/.exec(part.trim());
    if (m) versions.push(Number(m[1]));
  }
  return versions;
}
