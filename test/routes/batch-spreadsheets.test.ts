// POST /plants/batch with files as spreadsheets save them, and GET /plants/export as they open it
// (contract 2, version 5): each file made here byte for byte as Excel (several locales),
// LibreOffice and Google Sheets write it. UTF-8 with or without a BOM, `,`, `;` or tab, CRLF or LF
// are read; Windows-1252 and UTF-16 are refused with a sentence naming the byte, its line and how
// to save UTF-8, a foreign charset label is a 415; CSV that cannot be read is a sentence naming
// row and column, said once; nothing of a refused file is created. The export starts with a BOM,
// takes `?delimiter=;`, and (a fast-check property over hostile names) comes back through the
// import as it was, with either delimiter.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Client } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { homeOf } from '../helpers/gardens.js';
import { get, postBatch, postBatchJson } from '../helpers/plants.js';
import { suiteHarness } from '../helpers/suite.js';

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const utf8 = (text: string) => Buffer.from(text, 'utf8');
// Windows-1252 agrees with Latin-1 on every character these files hold (ä, ö, ü, ß, é).
const cp1252 = (text: string) => Buffer.from(text, 'latin1');
const csv = (c: Client, body: Buffer | string, type = 'text/csv') => postBatch(c, body, type);

/** The caller's plants as `name|tag` (tag empty when none), in id order. */
async function plants(c: Client): Promise<string[]> {
  const res = await get(c, '/plants?limit=1000');
  assert.equal(res.statusCode, 200, res.body);
  return res.json().map((p: { name: string; tag?: string }) => `${p.name}|${p.tag ?? ''}`);
}

const ADVICE =
  'Save it as "CSV UTF-8 (Comma delimited)" in Excel, or choose the UTF-8 character set in LibreOffice or Google Sheets, and import it again.';

for (const engine of ENGINES) {
  describe(`spreadsheet files through POST /plants/batch and GET /plants/export (${engine.name})`, {
    skip: engine.skip,
  }, () => {
    const h = suiteHarness(engine);

    it('imports the CSV files Excel, LibreOffice and Google Sheets save, whatever their delimiter, BOM and line ends', async () => {
      const files: [string, Buffer, string[]][] = [
        [
          'Excel "CSV UTF-8 (Comma delimited)": BOM, ",", CRLF',
          Buffer.concat([BOM, utf8('name,tag\r\nGröße Fächerpalme,indoor\r\n"Pilea ""coin""",\r\n')]),
          ['Größe Fächerpalme|indoor', 'Pilea "coin"|'],
        ],
        [
          'German Excel "CSV UTF-8 (Trennzeichen-getrennt)": BOM, ";", CRLF, cells with commas',
          Buffer.concat([
            BOM,
            utf8('Name;Tag\r\nGröße Fächerpalme;Zimmer, hell\r\nMonstera, groß;"Topf; 30 cm"\r\n;\r\n'),
          ]),
          ['Größe Fächerpalme|Zimmer, hell', 'Monstera, groß|Topf; 30 cm'],
        ],
        [
          "Excel with a used range wider than the table: empty columns after the header's",
          Buffer.concat([BOM, utf8('Name;Tag;;\r\nFern;hell;;\r\nAloe;;;\r\n;;;\r\n')]),
          ['Fern|hell', 'Aloe|'],
        ],
        [
          'LibreOffice default: UTF-8 without BOM, ",", LF, text cells quoted',
          utf8('"name","tag"\n"Café ☕","sun"\n"Fern; big",""\n'),
          ['Café ☕|sun', 'Fern; big|'],
        ],
        [
          'Google Sheets download: UTF-8 without BOM, ",", CRLF',
          utf8('name,tag\r\nAloe,sun\r\n"Ivy, English",\r\nMoss'),
          ['Aloe|sun', 'Ivy, English|', 'Moss|'],
        ],
        [
          'Excel "Text (Tab delimited)" (UTF-8): tabs, cells with "," and ";"',
          utf8('name\ttag\r\nFern, Boston\tshade; cool\r\n"Palm ""Areca"""\t\r\n'),
          ['Fern, Boston|shade; cool', 'Palm "Areca"|'],
        ],
      ];
      for (const [what, body, expected] of files) {
        const c = await h.user();
        const res = await csv(c, body);
        assert.equal(res.statusCode, 201, `${what}: ${res.body}`);
        assert.deepEqual(await plants(c), expected, what);
      }
    });

    it('refuses a file that is not UTF-8 (Excel\'s Windows-1252 CSV, its "Unicode Text") with the byte, its line and how to save UTF-8, creating nothing', async () => {
      const c = await h.user();
      const cases: [string, Buffer, string][] = [
        [
          'Excel "CSV (Comma delimited)", Windows-1252',
          cp1252('name,tag\r\nGröße Fächerpalme,indoor\r\n'),
          `The file is not UTF-8 text (byte 0xF6 at line 2 is not UTF-8; Excel's "CSV (Comma delimited)" saves Windows-1252). ${ADVICE}`,
        ],
        [
          'German Excel "CSV (Trennzeichen-getrennt)", Windows-1252, the bad byte on line 3',
          cp1252('Name;Tag\r\nMonstera;Topf\r\nFächerpalme;groß\r\n'),
          `The file is not UTF-8 text (byte 0xE4 at line 3 is not UTF-8; Excel's "CSV (Comma delimited)" saves Windows-1252). ${ADVICE}`,
        ],
        [
          'Excel "Unicode Text": UTF-16LE with a BOM',
          Buffer.concat([
            Buffer.from([0xff, 0xfe]),
            Buffer.from('name\ttag\r\nFächerpalme\t\r\n', 'utf16le'),
          ]),
          `The file is UTF-16 text (Excel's "Unicode Text" saves UTF-16), not UTF-8. ${ADVICE}`,
        ],
      ];
      for (const [what, body, message] of cases) {
        const res = await csv(c, body);
        assert.equal(res.statusCode, 400, what);
        assert.deepEqual(res.json(), { error: 400, code: 'invalid_body', message }, what);
      }
      const nd = await csv(c, cp1252('{"name":"Größe"}\n'), 'application/x-ndjson');
      assert.equal(nd.statusCode, 400);
      assert.equal(
        nd.json().message,
        'The file is not UTF-8 text (byte 0xF6 at line 1 is not UTF-8). Save it as UTF-8 and import it again.',
      );
      // A charset label other than UTF-8: 415 before the body is read, whatever it holds.
      for (const type of [
        'text/csv; charset=windows-1252',
        'text/csv;charset="ISO-8859-1"',
        'application/x-ndjson; charset=UTF-16',
      ]) {
        const res = await csv(c, 'name\r\nFern\r\n', type);
        assert.equal(res.statusCode, 415, type);
        assert.equal(res.json().code, 'unsupported_media_type');
        assert.match(
          res.json().message,
          /^Only UTF-8 text is accepted, and this .* body is labelled charset=/,
        );
      }
      assert.deepEqual(await plants(c), [], 'nothing was created');
      for (const type of [
        'text/csv; charset="UTF-8"',
        'text/csv; charset=us-ascii',
        'text/csv;charset=utf-8',
      ]) {
        assert.equal((await csv(c, 'name\r\nFern\r\n', type)).statusCode, 201, type);
      }
      // NDJSON saved with a BOM (a Windows editor's "UTF-8 with BOM") reads as it did.
      const ndBom = await csv(c, Buffer.concat([BOM, utf8('{"name":"Größe"}\n')]), 'application/x-ndjson');
      assert.equal(ndBom.statusCode, 201, ndBom.body);
    });

    it('says what is wrong with a CSV in a sentence naming the row and the column, once, and creates nothing', async () => {
      const c = await h.user();
      const refusal = async (body: string) => {
        const res = await csv(c, body);
        assert.equal(res.statusCode, 400, res.body);
        const { message, details } = res.json();
        return { message, details };
      };
      const one = (field: string, reason: string, where: string) => ({
        message: `${where} ${reason}`,
        details: [{ field, message: reason }],
      });
      assert.deepEqual(
        await refusal('name,tag\r\nFern,a\r\n"Pilea,b\r\nAloe,c\r\n'),
        one(
          '/rows/2',
          'has a quote that is never closed (column name): a cell that begins with a quote must end with one, and a quote inside it is written twice ("")',
          'Row 2',
        ),
      );
      // csv-parse said: Invalid Closing Quote: got "c" at line 3 instead of delimiter, record
      // delimiter, trimable character (if activated) or comment.
      assert.deepEqual(
        await refusal('name,tag\r\nok,\r\nx,"Pilea "coin""\r\n'),
        one(
          '/rows/2',
          'has text after the closing quote of a quoted cell (column tag): a quote inside a quoted cell is written twice ("")',
          'Row 2',
        ),
      );
      assert.deepEqual(
        await refusal('name\r\n5" pot\r\n'),
        one(
          '/rows/1',
          'has a quote inside a cell that does not begin with one (column name): put the whole cell in quotes and write each quote inside it twice, as in "5"" pot"',
          'Row 1',
        ),
      );
      assert.deepEqual(
        await refusal('name,tag\r\n"Fern";"x"\r\n'),
        one(
          '/rows/1',
          'separates its cells with ";", but the header with "," (column name): every row must use the header\'s delimiter',
          'Row 1',
        ),
      );
      assert.deepEqual(
        await refusal('name;tag\r\nFern;a;b\r\n'),
        one(
          '/rows/1',
          'has more cells than the header\'s 2 columns: a cell holding ";" must be in quotes',
          'Row 1',
        ),
      );
      // Field rules: the first problem and how many more; each detail its own reason.
      assert.deepEqual(await refusal('name;tag\r\n;x\r\nok;\u0007\r\nfine;\r\n'), {
        message: 'Row 1, column name: must not be empty (and 1 more problem)',
        details: [
          { field: '/rows/1/name', message: 'must not be empty' },
          { field: '/rows/2/tag', message: 'must not contain control characters' },
        ],
      });
      // A header of one quoted cell "name;tag": named as a header split on the wrong delimiter.
      const joined =
        '"name;tag" is not a column: it looks like several column names joined by ";", so the header seems split on the wrong delimiter (separate its columns with ",", ";" or a tab, outside quotes, and its rows the same way); the columns are name, tag, id, garden';
      assert.deepEqual(await refusal('"name;tag"\r\nFern;x\r\n'), {
        message: `Header column 1: ${joined} (and 1 more problem)`,
        details: [
          { field: '/columns/1', message: joined },
          { field: '/columns', message: 'must include a name column' },
        ],
      });
      assert.deepEqual(
        await refusal('name;tag;\r\nFern;a;\r\nAloe;b;c\r\n'),
        one('/rows/2', 'has a value in column 3, which the header does not name', 'Row 2'),
      );
      assert.deepEqual(
        await refusal('name;;tag\r\nFern;;a\r\n'),
        one(
          '/columns/2',
          'is empty: name the column (name, tag, id, garden) or remove it',
          'Header column 2:',
        ),
      );
      assert.deepEqual(await refusal('name,colour\r\nFern,red\r\n'), {
        message: 'Header column 2: "colour" is not a column: the columns are name, tag, id, garden',
        details: [
          { field: '/columns/2', message: '"colour" is not a column: the columns are name, tag, id, garden' },
        ],
      });
      for (const [body, message] of [
        [
          '',
          'The file is empty: it needs a header row naming its columns (name, tag, id, garden; name is required) and a row for each plant.',
        ],
        ['\ufeffname;tag\r\n', 'The file has a header but no rows: add a row for each plant under it.'],
      ]) {
        assert.deepEqual(await refusal(body!), { message, details: undefined });
      }
      assert.deepEqual(await plants(c), [], 'nothing was created');
    });

    it('exports CSV after a UTF-8 BOM, with ";" or a tab when asked, quoting what a spreadsheet would split, and refuses other delimiters', async () => {
      const c = await h.user();
      const names = ['plain', 'a,b', 'x;y', ' padded', '=1+1', 'say "hi"'];
      const made = await postBatchJson(c, { plants: names.map((name) => ({ name })) });
      assert.equal(made.statusCode, 201, made.body);
      const ids = made.json().ids as number[];
      const home = await homeOf(c);
      const csvRes = await get(c, '/plants/export?format=csv');
      assert.deepEqual([...csvRes.rawPayload.subarray(0, 3)], [0xef, 0xbb, 0xbf], 'a BOM first');
      const nd = await get(c, '/plants/export');
      assert.equal(nd.rawPayload[0], 0x7b, 'NDJSON has no BOM');
      for (const url of [
        '/plants/export?format=csv&delimiter=%3B',
        '/plants/export?format=csv&delimiter=;',
      ]) {
        const res = await get(c, url);
        assert.equal(res.statusCode, 200, `${url}: ${res.body}`);
        assert.deepEqual(res.body.split('\r\n'), [
          '\ufeffid;name;tag;garden',
          `${ids[0]};plain;;${home}`,
          // A cell holding "," in a ";" file: every cell quoted (a "," reader meets no formula).
          `"${ids[1]}";"a,b";"";"${home}"`,
          `${ids[2]};"x;y";;${home}`,
          `${ids[3]};" padded";;${home}`,
          `${ids[4]};'=1+1;;${home}`,
          `${ids[5]};"say ""hi""";;${home}`,
          '',
        ]);
      }
      const tab = await get(c, '/plants/export?format=csv&delimiter=%09');
      assert.equal(tab.statusCode, 200);
      assert.equal(tab.body.split('\r\n')[1], `${ids[0]}\tplain\t\t${home}`);
      const comma = await get(c, '/plants/export?format=csv&delimiter=%2C');
      assert.equal(comma.body, csvRes.body);
      for (const [url, message] of [
        [
          '/plants/export?format=csv&delimiter=%7C',
          'query parameter delimiter must be "," or ";" or a tab (%09)',
        ],
        [
          '/plants/export?format=ndjson&delimiter=%3B',
          'query parameter delimiter is for CSV only: add format=csv, or leave delimiter out for NDJSON',
        ],
        [
          '/plants/export?delimiter=%3B',
          'query parameter delimiter is for CSV only: add format=csv, or leave delimiter out for NDJSON',
        ],
      ] as const) {
        const res = await get(c, url);
        assert.equal(res.statusCode, 400, url);
        assert.equal(res.json().code, 'invalid_parameter', url);
        assert.equal(res.json().message, message, url);
      }
    });

    it('an export with either delimiter, BOM and all, is imported back as the same names and tags (property over hostile text)', async () => {
      const piece = fc.constantFrom(
        '"',
        ';',
        ',',
        '=',
        '+',
        '-',
        '@',
        "'",
        ' ',
        '""',
        'é',
        'Größe',
        '🌿',
        'a',
        'Zz',
        '\u00a0',
      );
      const text = (max: number) =>
        fc
          .array(piece, { minLength: 1, maxLength: max })
          .map((parts) => parts.join(''))
          .filter((s) => s.trim() !== '' && [...s].length <= 100);
      const plant = fc.record({ name: text(12), tag: fc.option(text(6), { nil: undefined }) });
      await fc.assert(
        fc.asyncProperty(
          fc.array(plant, { minLength: 1, maxLength: 8 }),
          fc.constantFrom(',', ';'),
          async (list, d) => {
            const c = await h.user();
            const made = await postBatchJson(c, { plants: list });
            assert.equal(made.statusCode, 201, made.body);
            const before = await plants(c);
            const exported = await get(c, `/plants/export?format=csv&delimiter=${encodeURIComponent(d)}`);
            assert.equal(exported.statusCode, 200);
            const back = await postBatch(c, exported.rawPayload, 'text/csv', '?ids=drop');
            assert.equal(back.statusCode, 201, `${back.body}\n${exported.body}`);
            assert.deepEqual(await plants(c), [...before, ...before]);
          },
        ),
        { seed: 53, numRuns: 15, endOnFailure: true },
      );
    });
  });
}
