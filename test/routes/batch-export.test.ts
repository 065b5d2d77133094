// POST /plants/batch and GET /plants/export (contract 2): all or nothing with a detail per bad row,
// hostile CSV and NDJSON bodies refused with nothing created, one event per plant, the garden and
// role rules of one create, Idempotency-Key over the batch, and exports (CSV and NDJSON, filters,
// formula-safe cells) accepted back by the batch import. Exports read by slow clients:
// export-slow.long.test.ts (the long tier).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { createGarden, homeOf, share } from '../helpers/gardens.js';
import { logSettled } from '../helpers/log.js';
import { get, postBatchJson as json, postBatch as send } from '../helpers/plants.js';
import { suiteHarness } from '../helpers/suite.js';

const csv = (c: Client, text: string | Buffer, query = '') => send(c, text, 'text/csv', query);

async function names(c: Client): Promise<string[]> {
  const res = await get(c, '/plants?limit=1000');
  assert.equal(res.statusCode, 200);
  return res.json().map((p: { name: string }) => p.name);
}

for (const engine of ENGINES) {
  describe(`POST /plants/batch and GET /plants/export (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);

    it('creates every plant of a JSON, CSV or NDJSON batch, in input order, each with its event', async () => {
      const c = await h.user();
      const head = await h.store.headPosition();
      let res = await json(c, { plants: [{ name: 'Fern' }, { name: 'Aloe', tag: 'sun', id: 9_000_001 }] });
      assert.equal(res.statusCode, 201, res.body);
      assert.deepEqual(res.json(), { created: 2, ids: [res.json().ids[0], 9_000_001] });
      res = await csv(c, '\ufeffname,tag\r\n"Pilea, ""coin""",\r\n"two, three",t\r\n');
      assert.equal(res.statusCode, 201, res.body);
      res = await send(
        c,
        '{"name":"Ivy","tag":null}\n\n{"name":"Moss","version":7}\n',
        'application/x-ndjson',
      );
      assert.equal(res.statusCode, 201, res.body);
      // In id order: the server's ids follow the client's (SQLite at once, PostgreSQL after the batch).
      assert.deepEqual((await names(c)).sort(), [
        'Aloe',
        'Fern',
        'Ivy',
        'Moss',
        'Pilea, "coin"',
        'two, three',
      ]);
      // On PostgreSQL the log is readable up to the oldest transaction running on the server.
      await logSettled(h.store);
      const after = await h.store.readEvents({
        after: head,
        gardens: null,
        limit: 1000,
      });
      const mine = after.events.filter((e) => e.type === 'plant.created' && e.owner === c.user);
      assert.equal(mine.length, 6, 'one event per plant');
    });

    it('refuses a bad batch whole, with a detail per bad row, and creates nothing', async () => {
      const c = await h.user();
      const cases: [string, () => ReturnType<typeof json>, string[]][] = [
        [
          'JSON rows',
          () => json(c, { plants: [{ name: 'ok' }, { name: '' }, { name: 'x', tag: ' ' }] }),
          ['/plants/1/name', '/plants/2/tag'],
        ],
        ['no plants', () => json(c, { plants: [] }), ['/plants']],
        [
          '1,001 plants',
          () => json(c, { plants: Array.from({ length: 1001 }, () => ({ name: 'p' })) }),
          ['/plants'],
        ],
        ['an unknown field', () => json(c, { plants: [{ name: 'a', colour: 'red' }] }), ['/plants/0/colour']],
        [
          'ids repeated',
          () =>
            json(c, {
              plants: [
                { name: 'a', id: 5 },
                { name: 'b', id: 5 },
              ],
            }),
          ['/plants/1/id'],
        ],
        [
          'CSV rows',
          () => csv(c, 'name,tag,id\r\nok,,\r\n,t,\r\nx,\u0007,0\r\n'),
          ['/rows/2/name', '/rows/3/tag', '/rows/3/id'],
        ],
        ['a missing name column', () => csv(c, 'tag\r\nx\r\n'), ['/columns']],
        ['an unknown column', () => csv(c, 'name,colour\r\nx,red\r\n'), ['/columns/2']],
        ['too many cells', () => csv(c, 'name,tag\r\na,b\r\nc,d,e\r\n'), ['/rows/2']],
        ['an unclosed quote', () => csv(c, 'name\r\na\r\n"b\r\n'), ['/rows/2']],
        ['a line break in a name', () => csv(c, 'name\r\n"two\nlines"\r\n'), ['/rows/1/name']],
        // A problem of the whole body is its message alone: no detail to say it twice.
        ['an empty file', () => csv(c, ''), []],
        ['a header alone', () => csv(c, 'name\r\n'), []],
        ['1,001 rows', () => csv(c, `name\n${'p\n'.repeat(1001)}`), []],
        ['invalid UTF-8', () => csv(c, Buffer.from([0x6e, 0x61, 0x6d, 0x65, 0x0a, 0xc3, 0x28, 0x0a])), []],
        [
          'NDJSON rows',
          () => send(c, '{"name":"a"}\nnot json\n{"name":3}\n[1]\n', 'application/x-ndjson'),
          ['/rows/2', '/rows/3/name', '/rows/4'],
        ],
      ];
      for (const [what, run, fields] of cases) {
        const res = await run();
        assert.equal(res.statusCode, 400, `${what}: ${res.body}`);
        assert.deepEqual(
          (res.json().details ?? []).map((d: { field: string }) => d.field),
          fields,
          what,
        );
      }
      assert.equal((await csv(c, `name\n${'x'.repeat(1024 * 1024)}\n`)).statusCode, 413);
      assert.equal((await send(c, 'name\nx\n', 'text/plain')).statusCode, 415);
      assert.deepEqual(await names(c), [], 'nothing was created');
    });

    it('checks a CSV header before the rows and bounds each record: a 400 naming the header or the row', async () => {
      const c = await h.user();
      const MiB = 1024 * 1024;
      const refusal = async (text: string) => {
        const res = await csv(c, text);
        assert.equal(res.statusCode, 400, res.body.slice(0, 300));
        const { message, details } = res.json();
        return { message, details };
      };
      // Nearly 1 MiB of header cells: refused at the 17th, whatever follows.
      const columns = 'has more than 16 cells: the columns are name, tag, id, garden, each at most once';
      assert.deepEqual(await refusal('name,'.repeat((MiB - 10) / 5)), {
        message: `The header ${columns}`,
        details: [{ field: '/columns', message: columns }],
      });
      // A bad header is named though the rows after it would be refused too (an unclosed quote at
      // the end): they are not read.
      const rows = 'a fern\n'.repeat((MiB - 6000) / 7);
      assert.deepEqual(await refusal(`nom\n${rows}"unclosed\n`), {
        message:
          'Header column 1: "nom" is not a column: the columns are name, tag, id, garden (and 1 more problem)',
        details: [
          { field: '/columns/1', message: '"nom" is not a column: the columns are name, tag, id, garden' },
          { field: '/columns', message: 'must include a name column' },
        ],
      });
      assert.deepEqual((await refusal(`${'x'.repeat(5000)}\n${rows}`)).details, [
        { field: '/columns', message: 'is longer than the 4096 bytes a row may hold' },
      ]);
      // A row: at most the header's cells, and 4096 bytes.
      const cells = 'has more cells than the header\'s 2 columns: a cell holding "," must be in quotes';
      assert.deepEqual(await refusal(`name,tag\na,b\n${','.repeat(MiB - 100)}\n`), {
        message: `Row 2 ${cells}`,
        details: [{ field: '/rows/2', message: cells }],
      });
      assert.deepEqual(await refusal(`name\nok\n"${'x'.repeat(5000)}"\n`), {
        message: 'Row 2 is longer than the 4096 bytes a row may hold',
        details: [{ field: '/rows/2', message: 'is longer than the 4096 bytes a row may hold' }],
      });
      // Every field's own limits fit within the bound: their own details name them.
      const longest = `${'x'.repeat(201)},${'t'.repeat(101)},${'9'.repeat(17)},${'g'.repeat(201)}`;
      assert.deepEqual(
        (await refusal(`name,tag,id,garden\n${longest}\n`)).details.map((d: { field: string }) => d.field),
        ['/rows/1/name', '/rows/1/tag', '/rows/1/id', '/rows/1/garden'],
      );
      assert.deepEqual(await names(c), []);
    });

    it('refuses a batch whose id exists (409 naming it) or whose garden the caller may not write, creating nothing', async () => {
      const c = await h.user();
      const owner = await h.user();
      const viewing = (await createGarden(owner, 'Viewed')).id;
      await share(owner, viewing, c.user, 'viewer');
      const taken = (await json(owner, { plants: [{ name: 'taken' }] })).json().ids[0];
      let res = await json(c, { plants: [{ name: 'new' }, { name: 'dup', id: taken }] });
      assert.equal(res.statusCode, 409);
      assert.equal(res.json().code, 'plant_exists');
      assert.match(res.json().message, new RegExp(String(taken)));
      res = await csv(c, `name,garden\r\nmine,\r\nthere,${viewing}\r\n`);
      assert.equal(res.statusCode, 403, res.body);
      res = await json(c, { plants: [{ name: 'x' }] }, '?garden=gdn_000000000000000000000000');
      assert.equal(res.statusCode, 404);
      assert.deepEqual(await names(c), []);
      assert.deepEqual((await get(owner, '/plants')).json(), [{ name: 'taken' }]);
    });

    it('replays a batch for its Idempotency-Key and refuses the key for another batch', async () => {
      const c = await h.user();
      const key = { 'idempotency-key': `k-${engine.name}` };
      const body = { plants: [{ name: 'once' }, { name: 'twice?' }] };
      const first = await json(c, body, '', key);
      assert.equal(first.statusCode, 201);
      const again = await json(c, body, '', key);
      assert.equal(again.statusCode, 201);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.json(), first.json());
      assert.equal((await json(c, { plants: [{ name: 'other' }] }, '', key)).statusCode, 422);
      assert.deepEqual(await names(c), ['once', 'twice?']);
    });

    it('exports what the filters show, formula-safe, and the export is accepted back by the batch import', async () => {
      const c = await h.user();
      const home = await homeOf(c);
      const other = (await createGarden(c, 'Other')).id;
      const tricky = [
        '=SUM(A1)',
        '+1',
        '-2',
        '@x',
        "'quoted",
        "'=both",
        'a,b "c"',
        'semi;colon',
        'Café ☕',
        ' padded ',
      ];
      const made = await json(c, {
        plants: tricky.map((name, i) => ({ name, ...(i % 2 ? { tag: `-t${i}` } : {}) })),
      });
      assert.equal(made.statusCode, 201, made.body);
      assert.equal((await json(c, { plants: [{ name: 'elsewhere' }], garden: other })).statusCode, 201);
      const stranger = await h.user();
      await json(stranger, { plants: [{ name: 'not mine' }] });

      const csvRes = await get(c, '/plants/export?format=csv');
      assert.equal(csvRes.statusCode, 200);
      assert.match(String(csvRes.headers['content-type']), /^text\/csv/);
      const lines = csvRes.body.split('\r\n');
      assert.equal(lines[0], '\ufeffid,name,tag,garden');
      assert.ok(
        lines.some((l) => /^\d+,'=SUM\(A1\),,/.test(l)),
        'a formula is prefixed with a quote',
      );
      assert.ok(
        lines.some((l) => /^\d+,'\+1,'-t1,/.test(l)),
        'a tag too',
      );
      assert.ok(!csvRes.body.includes('not mine'));
      assert.equal(
        (await get(c, '/plants/export')).headers['content-type'],
        'application/x-ndjson; charset=utf-8',
      );
      const viaAccept = await c.request({
        method: 'GET',
        url: '/plants/export',
        headers: { accept: 'text/csv' },
      });
      assert.equal(viaAccept.body, csvRes.body);

      const nd = (await get(c, `/plants/export?garden=${home}`)).body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      assert.deepEqual(
        nd.map((p) => p.name),
        tricky,
      );
      assert.ok(nd.every((p) => p.garden === home && Number.isInteger(p.version) && Number.isInteger(p.id)));
      const found = (await get(c, '/plants/export?q=cafe&format=ndjson')).body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).name);
      assert.deepEqual(found, ['Café ☕']);
      assert.equal((await get(c, '/plants/export?tag=-t1')).body.trim().split('\n').length, 1);
      assert.equal((await get(c, '/plants/export?garden=gdn_000000000000000000000000')).statusCode, 404);
      assert.equal((await get(c, '/plants/export?format=xml')).statusCode, 400);
      assert.equal((await get(c, '/plants/export?limit=5')).statusCode, 400);

      // Round trips: CSV and NDJSON, into another user's store with new ids, give the same plants.
      const expected = [...tricky, 'elsewhere'];
      for (const [body, type] of [
        [csvRes.body.replaceAll(home, '').replaceAll(other, ''), 'text/csv'],
        [
          (await get(c, '/plants/export')).body
            .replaceAll(`"garden":"${home}",`, '')
            .replaceAll(`"garden":"${other}",`, ''),
          'application/x-ndjson',
        ],
      ] as const) {
        const fresh = await h.user();
        const res = await send(fresh, body, type, '?ids=drop');
        assert.equal(res.statusCode, 201, `${type}: ${res.body}`);
        const back = await get(fresh, '/plants?limit=1000');
        assert.deepEqual(
          back.json().map((p: { name: string }) => p.name),
          expected,
          type,
        );
        const tags = (await get(c, '/plants?limit=1000')).json().map((p: { tag?: string }) => p.tag ?? null);
        assert.deepEqual(
          back.json().map((p: { tag?: string }) => p.tag ?? null),
          tags,
          `${type}: tags`,
        );
      }
      // Without ?ids=drop the export's ids exist: nothing is created.
      assert.equal((await csv(c, csvRes.body)).statusCode, 409);
      // Another user naming gardens that are not theirs: 404, nothing created.
      const intruder = await h.user();
      assert.equal((await csv(intruder, csvRes.body, '?ids=drop')).statusCode, 404);
      assert.deepEqual(await names(intruder), []);
    });

    it('exports a record with a cell holding ";" with every cell quoted, so a spreadsheet splitting on ";" runs no formula, and reads it back', async () => {
      const c = await h.user();
      const tricky = ['a;=1+1;', 'x;+cmd', 'y;-2', 'z;@SUM(A1)', '=1;2', 'plain'];
      const made = await json(c, {
        plants: tricky.map((name, i) => ({ name, tag: i === 5 ? 'none' : `t;${name}` })),
      });
      assert.equal(made.statusCode, 201, made.body);
      const res = await get(c, '/plants/export?format=csv');
      assert.equal(res.statusCode, 200);
      const home = await homeOf(c);
      const ids = made.json().ids as number[];
      assert.deepEqual(res.body.split('\r\n').slice(1, -1), [
        `"${ids[0]}","a;=1+1;","t;a;=1+1;","${home}"`,
        `"${ids[1]}","x;+cmd","t;x;+cmd","${home}"`,
        `"${ids[2]}","y;-2","t;y;-2","${home}"`,
        `"${ids[3]}","z;@SUM(A1)","t;z;@SUM(A1)","${home}"`,
        `"${ids[4]}","'=1;2","t;=1;2","${home}"`,
        `${ids[5]},plain,none,${home}`,
      ]);
      // Split on ";" as a spreadsheet with that list separator does: a quote counts only in a field
      // that begins with one (and toggles there), elsewhere it is a character. No field begins with
      // a formula character.
      for (const line of res.body.split('\r\n').slice(1, -1)) {
        const fields: string[] = [];
        let field = '';
        let quoted = false;
        for (const ch of line) {
          if (ch === ';' && !quoted) {
            fields.push(field);
            field = '';
          } else {
            if (ch === '"' && (field === '' || field.startsWith('"'))) quoted = !quoted;
            field += ch;
          }
        }
        fields.push(field);
        assert.ok(!fields.some((f) => /^[=+\-@]/.test(f)), `a formula among ${JSON.stringify(fields)}`);
      }
      const fresh = await h.user();
      const back = await csv(fresh, res.body.replace(/,"?gdn_[^\r]*\r\n/g, ',\r\n'), '?ids=drop');
      assert.equal(back.statusCode, 201, back.body);
      assert.deepEqual(await names(fresh), tricky);
    });
  });
}
