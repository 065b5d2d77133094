// The version 4 plant commands against a running service (contract section 7): plants search,
// plants export (CSV and NDJSON, to stdout) and plants import FILE (1,000 rows a request, a progress
// line on stderr, the first refused batch named by its file rows, exit 1, nothing of it created);
// version 5: a file that is not UTF-8 refused before anything is sent, a ";" file split into
// batches that keep its delimiter, an export with --delimiter.

import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cli, type Server, serve } from './process.js';

describe('plants search, export and import (CONTRACT.md section 7)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-plant-files-'));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` };
  let server: Server;
  const as: Record<string, string> = {};
  const other: Record<string, string> = {};
  const third: Record<string, string> = {};
  before(async () => {
    server = await serve([], env);
    for (const [who, into] of [
      ['files-user', as],
      ['files-other', other],
      ['files-third', third],
    ] as const) {
      const token = (await cli(['token', 'create', '--user', who], env)).stdout.trim();
      Object.assign(into, { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: token });
    }
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('imports a CSV file in batches with progress, searches it, and exports it back into another store', async () => {
    const rows = Array.from({ length: 2100 }, (_, i) => `"Plant ${i}, ""n""",${i % 2 ? 'odd' : ''}`);
    rows[5] = '=Monstera deliciosa,big';
    const file = join(dir, 'plants.csv');
    writeFileSync(file, `\uFEFFname,tag\r\n${rows.join('\r\n')}\r\n`);
    const imported = await cli(['plants', 'import', file], as);
    assert.equal(imported.code, 0, imported.stderr);
    assert.equal(imported.stdout, 'imported 2100 plants\n');
    assert.deepEqual(imported.stderr.trim().split('\n'), [
      'imported 1000/2100',
      'imported 2000/2100',
      'imported 2100/2100',
    ]);

    const found = await cli(['plants', 'search', 'MON del'], as);
    assert.equal(found.code, 0, found.stderr);
    assert.match(found.stdout, /^\d+\t=Monstera deliciosa\tbig\tgdn_\w+\n$/);
    const json = await cli(['plants', 'search', 'plant 20', '--json'], as);
    assert.equal(JSON.parse(json.stdout).length, 1 + 10 + 100, 'Plant 20, 200–209, 2000–2099');

    const csv = await cli(['plants', 'export', '--format', 'csv', '--tag', 'big'], as);
    assert.equal(csv.code, 0, csv.stderr);
    assert.match(csv.stdout, /^\uFEFFid,name,tag,garden\r\n\d+,'=Monstera deliciosa,big,gdn_\w+\r\n$/);
    const nd = await cli(['plants', 'export'], as);
    const lines = nd.stdout.trim().split('\n');
    assert.equal(lines.length, 2100);
    // Into another user's store with new ids: gardens removed, so theirs is used.
    const mine = lines.map((l) => {
      const { garden: _g, id: _i, ...rest } = JSON.parse(l);
      return JSON.stringify(rest);
    });
    const ndFile = join(dir, 'export.ndjson');
    writeFileSync(ndFile, `${mine.join('\n')}\n`);
    const again = await cli(['plants', 'import', ndFile, '--new-ids', '--json'], other);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout).created, 2100);
    const theirs = await cli(['plants', 'export', '--q', 'monstera'], other);
    assert.equal(JSON.parse(theirs.stdout).name, '=Monstera deliciosa');
  });

  it('stops at the first refused batch, naming its rows in the file, and creates none of it', async () => {
    const rows = Array.from({ length: 1500 }, (_, i) => (i === 1203 ? ',x' : `Fern ${i},`));
    const file = join(dir, 'bad.csv');
    writeFileSync(file, `name,tag\n${rows.join('\n')}\n`);
    const before = JSON.parse(
      (await cli(['plants', 'export', '--q', 'fern', '--format', 'ndjson'], other)).stdout || 'null',
    );
    assert.equal(before, null, 'no ferns yet');
    const r = await cli(['plants', 'import', file], other);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /rows 1001–1500 refused, none of them created: row 1204, column name: must not be empty \(1000 plants imported before them\)/,
    );
    const ferns = (await cli(['plants', 'export', '--q', 'fern'], other)).stdout.trim().split('\n');
    assert.equal(ferns.length, 1000, 'the first batch stays, the refused one is not there');
    const usage = await cli(['plants', 'export', '--format', 'xml'], other);
    assert.equal(usage.code, 2);
    const missing = await cli(['plants', 'import', join(dir, 'nope.csv')], other);
    assert.equal(missing.code, 2);
  });

  it('refuses a Windows-1252 file with one line and exit 2, sending nothing; imports a ";" file of 2,500 rows in 3 requests', async () => {
    const latin = join(dir, 'excel-ansi.csv');
    writeFileSync(
      latin,
      Buffer.from('name,tag\r\nMonstera,indoor\r\nGröße Fächerpalme,indoor\r\n', 'latin1'),
    );
    const refused = await cli(['plants', 'import', latin], third);
    assert.equal(refused.code, 2);
    assert.equal(
      refused.stderr,
      `plantstore: ${latin}: The file is not UTF-8 text (byte 0xF6 at line 3 is not UTF-8; Excel's "CSV (Comma delimited)" saves Windows-1252). Save it as "CSV UTF-8 (Comma delimited)" in Excel, or choose the UTF-8 character set in LibreOffice or Google Sheets, and import it again.\n`,
    );
    assert.equal((await cli(['plants', 'export'], third)).stdout, '', 'nothing was created');
    // A CSV the command cannot split into rows: the service's sentence, before anything is sent.
    const unclosed = join(dir, 'unclosed.csv');
    writeFileSync(unclosed, 'Name;Tag\r\nFern;x\r\n"Pilea;y\r\n');
    const bad = await cli(['plants', 'import', unclosed], third);
    assert.equal(bad.code, 2);
    assert.equal(
      bad.stderr,
      'plantstore: row 2 of the file has a quote that is never closed (column name): a cell that begins with a quote must end with one, and a quote inside it is written twice ("")\n',
    );

    // As German Excel saves "CSV UTF-8 (Trennzeichen-getrennt)": BOM, ";", CRLF, commas in cells.
    const rows = Array.from(
      { length: 2500 },
      (_, i) => `Palme ${i}, groß;${i % 2 ? '"Topf; 30 cm"' : 'hell, warm'}`,
    );
    const semi = join(dir, 'excel-de.csv');
    writeFileSync(semi, `\uFEFFName;Tag\r\n${rows.join('\r\n')}\r\n`);
    const imported = await cli(['plants', 'import', semi], third);
    assert.equal(imported.code, 0, imported.stderr);
    assert.equal(imported.stdout, 'imported 2500 plants\n');
    assert.deepEqual(imported.stderr.trim().split('\n'), [
      'imported 1000/2500',
      'imported 2000/2500',
      'imported 2500/2500',
    ]);
    const exported = await cli(
      ['plants', 'export', '--format', 'csv', '--delimiter', ';', '--q', 'palme 2499'],
      third,
    );
    assert.equal(exported.code, 0, exported.stderr);
    assert.match(
      exported.stdout,
      /^\uFEFFid;name;tag;garden\r\n"\d+";"Palme 2499, groß";"Topf; 30 cm";"gdn_\w+"\r\n$/,
    );
    const usage = await cli(['plants', 'export', '--delimiter', ';'], third);
    assert.equal(usage.code, 2);
    // 1,000 rows of 300 emoji are 1.2 MB but 600,000 UTF-16 units: split by bytes, as the service counts.
    const wide = join(dir, 'emoji.csv');
    const emoji = Array.from({ length: 1000 }, (_, i) => `${i}${'🌿'.repeat(196)};${'🌵'.repeat(100)}`);
    writeFileSync(wide, `name;tag\n${emoji.join('\n')}\n`);
    const big = await cli(['plants', 'import', wide, '--json'], third);
    assert.equal(big.code, 0, big.stderr);
    assert.equal(JSON.parse(big.stdout).created, 1000);
    assert.equal(big.stderr.trim().split('\n').length, 2, 'two requests');
  });
});
