import { type Me, PlantStore, PlantStoreError } from 'plantstore/client';

/** What the service tells the console at /console/config.json. */
export interface Settings {
  oidc: { issuer: string; clientId: string; scope: string; audience: string } | null;
  /** Whether a delete goes to the trash (and "Undo" can bring it back); false: deletes are final. */
  trash: boolean;
}

/** A signed-in person: the token, the client that sends it, and who the service says it is. */
export interface Session {
  token: string;
  store: PlantStore;
  me: Me;
}

// The token lives in memory; with "Remember in this tab", also in this tab's sessionStorage.
// Never in localStorage, a cookie or a URL (CONTRACT.md section 11).
const TOKEN_KEY = 'plantstore.console.token';

export function rememberedToken(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function keepToken(token: string, remember: boolean): void {
  try {
    if (remember) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage refused (a private window's quota): the token stays in memory only.
  }
}

export function forgetToken(): void {
  keepToken('', false);
}

/** Checks the token with GET /me and makes the session that the views use. */
export async function openSession(token: string): Promise<Session> {
  // The service itself: every request goes to this origin, through the project's own client.
  const store = new PlantStore({ url: location.origin, token, deadlineMs: 20_000, retries: 2 });
  return { token, store, me: await store.me() };
}

/**
 * A fresh Idempotency-Key. Made here with getRandomValues, which works on plain http too, where
 * the client's default (crypto.randomUUID) exists only in secure contexts.
 */
export function newKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** "name must not be blank" → "Name must not be blank." */
export function sentence(text: string): string {
  const t = text.trim();
  return t === '' ? t : `${t[0]!.toUpperCase()}${t.slice(1)}${/[.!?…]$/.test(t) ? '' : '.'}`;
}

/**
 * A field the service names by a JSON pointer, in words: `/name` → "name", `/plants/3/tag` →
 * "plant 3, tag", `/rows/4/name` → "row 4, name".
 */
// Fields whose pointer is not the word a person reads.
const FIELD_WORDS: Record<string, string> = { q: 'the search', url: 'the URL', expiresIn: 'expires in' };

function fieldWords(pointer: string): string {
  const parts = pointer.split('/').filter(Boolean);
  const words: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const next = parts[i + 1];
    if (next !== undefined && /^\d+$/.test(next)) {
      words.push(`${parts[i]!.replace(/s$/, '')} ${next}`);
      i++;
    } else words.push(FIELD_WORDS[parts[i]!] ?? parts[i]!);
  }
  return words.join(', ');
}

/**
 * A sentence for a person from any failure of a call: each field the service names said once, as
 * a sentence ("Name must not be blank."), else the service's own sentence.
 */
export function describe(err: unknown): string {
  if (err instanceof PlantStoreError) {
    if (err.status === 0) return 'The service could not be reached. Check the connection and try again.';
    const fields = (err.details ?? []).filter((d) => d.field);
    const said = fields.length
      ? fields.map((d) => sentence(`${fieldWords(d.field)} ${d.message}`)).join(' ')
      : sentence(err.message);
    const ref = err.status >= 500 && err.requestId ? ` (request ${err.requestId})` : '';
    return `${said}${ref}`;
  }
  return sentence(err instanceof Error ? err.message : String(err));
}

export const isStatus = (err: unknown, status: number): err is PlantStoreError =>
  err instanceof PlantStoreError && err.status === status;
