/*
 * A loadable SQLite extension the store's connections load (src/store/sqlite/plan-once.ts): it
 * turns on the query planner stability guarantee (SQLITE_DBCONFIG_ENABLE_QPSG) for the connection,
 * and adds `plantstore_qpsg()`, which answers whether it is on (1) for that connection.
 *
 * Why: SQLite prepares a statement again whenever a value bound to a parameter its planner looked
 * at changes, and FTS5 looks a term up in each segment of its index with one statement of its own
 * (`SELECT pgno FROM ..._idx WHERE segid=? AND term<=? ...`), which SQLite marks so whenever the
 * segment number bound is 0 or 1 or was. FTS5 numbers a new segment with the lowest free number,
 * so a segment 1 is usually there, and every search prepared that statement again about twice per
 * term and garden token. The store's own statements are planned once already (planOnce); this
 * reaches the ones SQLite's extensions prepare, which no SQL of ours can. better-sqlite3 has no API
 * for sqlite3_db_config, but an extension it loads is handed the connection.
 *
 * Built by `npm run build` (scripts/build-sqlite-extension.ts) with the machine's C compiler,
 * against the sqlite3ext.h of the SQLite better-sqlite3 ships; it calls SQLite only through the
 * routines the loading connection hands it.
 */
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

static void qpsg(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  int on = 0;
  (void)argc;
  (void)argv;
  if (sqlite3_db_config(sqlite3_context_db_handle(ctx), SQLITE_DBCONFIG_ENABLE_QPSG, -1, &on) != SQLITE_OK) {
    sqlite3_result_error(ctx, "plantstore_qpsg: sqlite3_db_config failed", -1);
    return;
  }
  sqlite3_result_int(ctx, on);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_plantstore_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
  int on = 0;
  int rc;
  SQLITE_EXTENSION_INIT2(api);
  /* The function first, then the setting: a connection with the setting on can always read it. */
  rc = sqlite3_create_function(db, "plantstore_qpsg", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, 0, qpsg, 0, 0);
  if (rc != SQLITE_OK) return rc;
  if (sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_QPSG, 1, &on) != SQLITE_OK || on != 1) {
    *err = sqlite3_mprintf("could not turn on SQLITE_DBCONFIG_ENABLE_QPSG");
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}
