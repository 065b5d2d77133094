// What a batch file's bytes are (src/plants/file-encoding.ts): the byte a "not UTF-8" sentence
// names is the first one a strict UTF-8 decoder refuses, on the line it is on (a fast-check
// property against Node's own isUtf8 over random bytes and text); UTF-16 is named as such; a
// Content-Type's charset parameter is read as RFC 9110 writes it (case, quotes, spaces).
import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { encodingProblem, firstBadByte, foreignCharset } from '../../src/plants/file-encoding.js';

const named = (problem: string | null) => {
  const m = /byte 0x([0-9A-F]{2}) at line (\d+) /.exec(problem ?? '');
  return m ? { byte: Number.parseInt(m[1]!, 16), line: Number(m[2]) } : null;
};

describe('a batch file that is not UTF-8', () => {
  it('names the first byte a strict decoder refuses and its line, and nothing for UTF-8 (property)', () => {
    // Mostly text with line breaks, now and then a byte or bytes of a broken sequence.
    const chunk = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 6 }).map((s) => Buffer.from(s)),
      fc.constantFrom('\n', '\r\n').map((s) => Buffer.from(s)),
      fc.uint8Array({ minLength: 1, maxLength: 3 }).map((b) => Buffer.from(b)),
    );
    fc.assert(
      fc.property(fc.array(chunk, { maxLength: 20 }), (chunks) => {
        const bytes = Buffer.concat(chunks);
        const problem = encodingProblem(bytes, 'csv');
        if (bytes[0] === 0xff || bytes[0] === 0xfe || bytes[0] === 0 || bytes[1] === 0) return;
        if (isUtf8(bytes)) {
          assert.equal(problem, null);
          return;
        }
        // Everything before it is UTF-8, and no character begins at it: the first refused sequence.
        const at = firstBadByte(bytes);
        assert.ok(at >= 0);
        assert.ok(isUtf8(bytes.subarray(0, at)));
        for (let n = 1; n <= 4 && at + n <= bytes.length; n++) assert.ok(!isUtf8(bytes.subarray(at, at + n)));
        assert.deepEqual(named(problem), {
          byte: bytes[at],
          line: 1 + bytes.subarray(0, at).filter((b) => b === 0x0a).length,
        });
      }),
      { seed: 53, numRuns: 2000 },
    );
  });

  it("says so for Excel's Windows-1252 and UTF-16 files, with the advice", () => {
    assert.equal(
      encodingProblem(Buffer.from('name\r\nFern\r\nFächerpalme\r\n', 'latin1'), 'csv'),
      'The file is not UTF-8 text (byte 0xE4 at line 3 is not UTF-8; Excel\'s "CSV (Comma delimited)" saves Windows-1252). Save it as "CSV UTF-8 (Comma delimited)" in Excel, or choose the UTF-8 character set in LibreOffice or Google Sheets, and import it again.',
    );
    for (const bytes of [
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('name\r\n', 'utf16le')]),
      Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from('name\r\n', 'utf16le').swap16()]),
      Buffer.from('name\r\n', 'utf16le'),
    ]) {
      assert.match(
        encodingProblem(bytes, 'csv') ?? '',
        /^The file is UTF-16 text \(Excel's "Unicode Text" saves UTF-16\), not UTF-8\. Save it as "CSV UTF-8/,
      );
    }
    assert.equal(encodingProblem(Buffer.from('\ufeffname\r\nGröße\r\n'), 'csv'), null);
    assert.equal(
      encodingProblem(Buffer.from([0xed, 0xa0, 0x80]), 'ndjson')?.includes('byte 0xED at line 1'),
      true,
    );
  });

  it('reads the charset of a Content-Type: UTF-8 and US-ASCII in any case and quoting are UTF-8', () => {
    for (const ok of [
      undefined,
      'text/csv',
      'text/csv; charset=utf-8',
      'text/csv;charset="UTF-8"',
      'text/csv; CHARSET=US-ASCII',
      'text/csv; header=present',
    ]) {
      assert.equal(foreignCharset(ok), null, ok);
    }
    assert.equal(foreignCharset('text/csv; charset=windows-1252'), 'windows-1252');
    assert.equal(foreignCharset('text/csv; header=present; charset="ISO-8859-1"'), 'ISO-8859-1');
    assert.equal(foreignCharset('application/x-ndjson;charset=utf-16'), 'utf-16');
  });
});
