// The client's search, batch and export (store.plants): search walks every page of a q, batch sends
// JSON, CSV and NDJSON with one Idempotency-Key across retries, export reads the stream line by line
// (the service's answer arrives in pieces) and its output goes back in through batch; refusals are
// PlantStoreErrors naming the bad rows. Both engines.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PlantStore, PlantStoreError } from '../../src/client/index.js';
import { ENGINES } from '../helpers/engines.js';
import { suiteHarness } from '../helpers/suite.js';

for (const engine of ENGINES) {
  describe(`the client's search, batch and export (${engine.name})`, { skip: engine.skip }, () => {
    const h = suiteHarness(engine);
    let base = '';
    const client = async () => {
      base ||= await h.app.listen({ port: 0, host: '127.0.0.1' });
      return new PlantStore({ url: base, token: (await h.user()).token });
    };

    it('batch creates JSON, CSV and NDJSON plants; search walks every page of a query', async () => {
      const store = await client();
      const json = await store.plants.batch(Array.from({ length: 7 }, (_, i) => ({ name: `Monstera ${i}` })));
      assert.equal(json.created, 7);
      const csv = await store.plants.batch({ csv: 'name,tag\r\nCafé rose,pink\r\nFern,\r\n' });
      const nd = await store.plants.batch({
        ndjson: '{"name":"Ivy"}\n{"name":"Monstera deliciosa","tag":"big"}\n',
      });
      assert.deepEqual([csv.created, nd.created], [2, 2]);
      const found = [];
      for await (const p of store.plants.search('mon', { limit: 3, include: ['garden'] })) found.push(p);
      assert.deepEqual(
        found.map((p) => p.name),
        [...Array.from({ length: 7 }, (_, i) => `Monstera ${i}`), 'Monstera deliciosa'],
      );
      assert.ok(found.every((p) => typeof p.garden === 'string' && Number.isInteger(p.id)));
      assert.deepEqual(
        (await store.all({ q: 'CAFE' })).map((p) => p.tag),
        ['pink'],
      );
      const bad = await store.plants.batch({ csv: 'name\r\nok\r\n\u0007\r\n' }).catch((e: unknown) => e);
      assert.ok(bad instanceof PlantStoreError && bad.status === 400);
      assert.deepEqual(
        bad.details?.map((d) => d.field),
        ['/rows/2/name'],
      );
      const badQ = await store.all({ q: ' ' }).catch((e: unknown) => e);
      assert.ok(badQ instanceof PlantStoreError && badQ.status === 400 && badQ.details?.[0]?.field === '/q');
    });

    it('a batch retried with its key creates once', async () => {
      const store = await client();
      const key = `bulk-${engine.name}`;
      const first = await store.plants.batch([{ name: 'Once' }, { name: 'Twice' }], { idempotencyKey: key });
      const again = await store.plants.batch([{ name: 'Once' }, { name: 'Twice' }], { idempotencyKey: key });
      assert.deepEqual(again, first);
      assert.equal((await store.all()).length, 2);
    });

    it('export streams every plant, and its CSV and NDJSON go back in with new ids', async () => {
      const store = await client();
      const names = Array.from({ length: 2500 }, (_, i) => `${i % 7 === 0 ? '=' : ''}Plant ${i}`);
      for (let i = 0; i < names.length; i += 1000) {
        await store.plants.batch(
          names.slice(i, i + 1000).map((name, k) => ({ name, tag: k % 2 ? 'odd' : null })),
        );
      }
      const exported = [];
      for await (const p of store.plants.export()) exported.push(p);
      assert.deepEqual(
        exported.map((p) => p.name),
        names,
      );
      assert.ok(exported.every((p) => Number.isInteger(p.version) && typeof p.garden === 'string'));
      const lines = [];
      for await (const line of store.plants.exportText({ tag: 'odd' }, 'csv')) lines.push(line);
      // As the service wrote it: the BOM first, so a file written from these lines opens in Excel.
      assert.equal(lines[0], '\ufeffid,name,tag,garden\r\n');
      assert.equal(lines.length, 1 + 1250);
      const semi = [];
      for await (const line of store.plants.exportText({ q: 'plant 7' }, 'csv', { delimiter: ';' }))
        semi.push(line);
      assert.equal(semi[0], '\ufeffid;name;tag;garden\r\n');
      assert.match(semi[1]!, /^\d+;'=Plant 7;odd;gdn_\w+\r\n$/);
      // Into another user's store: ids dropped, gardens left to the batch's default.
      const other = await client();
      const csv = lines
        .slice(0, 1001)
        .map((l, i) => (i === 0 ? l : l.replace(/,[^,]*\r\n$/, ',\r\n')))
        .join('');
      assert.equal((await other.plants.batch({ csv }, { newIds: true })).created, 1000);
      const ndjson = exported
        .slice(0, 1000)
        .map(({ name, tag }) => JSON.stringify({ name, tag }))
        .join('\n');
      assert.equal((await other.plants.batch({ ndjson }, { newIds: true })).created, 1000);
      const theirs = await other.all({ limit: 1000 });
      assert.equal(theirs.length, 2000);
      assert.ok(
        theirs.some((p) => p.name === '=Plant 7'),
        'a formula-safe cell comes back as it was',
      );
    });
  });
}
