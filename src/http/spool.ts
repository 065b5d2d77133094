import { randomUUID } from 'node:crypto';
import { open, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';

/**
 * Writes every chunk to a temporary file as fast as `chunks` gives them, then returns the file as
 * a stream, to be sent at whatever pace the client reads: whatever produced the chunks (a store's
 * snapshot) is released before the first byte goes out, however slowly the client reads. The file
 * is unlinked as soon as it is open, so nothing is left behind when the stream closes, or when the
 * process dies. `dir`: the operating system's temporary folder (TMPDIR) unless told.
 */
export async function spool(chunks: AsyncIterable<string>, dir = tmpdir()): Promise<Readable> {
  const path = join(dir, `plantstore-spool-${randomUUID()}`);
  const file = await open(path, 'wx+', 0o600);
  try {
    await unlink(path);
    for await (const chunk of chunks) await file.write(chunk);
    return file.createReadStream({ start: 0 });
  } catch (err) {
    await file.close();
    throw err;
  }
}
