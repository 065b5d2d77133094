import { render } from 'preact';
import { App } from './app.js';
import type { Settings } from './session.js';
import { applyTheme, initialDark } from './theme.js';

applyTheme(initialDark());

async function settings(): Promise<Settings> {
  try {
    const res = await fetch(`${import.meta.env.BASE_URL}config.json`, {
      headers: { accept: 'application/json' },
    });
    if (res.ok) {
      const got = (await res.json()) as Partial<Settings>;
      // A service older than the trash setting sends none: it keeps a trash (version 5's default).
      return { oidc: got.oidc ?? null, trash: got.trash !== false };
    }
  } catch {
    // The service is unreachable: token sign-in is offered; its own request will say so.
  }
  return { oidc: null, trash: true };
}

const root = document.getElementById('app');
if (root) render(<App settings={await settings()} />, root);
