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
    if (res.ok) return (await res.json()) as Settings;
  } catch {
    // The service is unreachable: token sign-in is offered; its own request will say so.
  }
  return { oidc: null };
}

const root = document.getElementById('app');
if (root) render(<App settings={await settings()} />, root);
