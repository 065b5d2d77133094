// The theme is the one thing the console keeps in localStorage (a key with "theme" in its name).
const THEME_KEY = 'plantstore.console.theme';
const query = () => matchMedia('(prefers-color-scheme: dark)');

function saved(): 'dark' | 'light' | null {
  try {
    const v = localStorage.getItem(THEME_KEY);
    return v === 'dark' || v === 'light' ? v : null;
  } catch {
    return null;
  }
}

/** Dark when the person chose dark here, or chose nothing and the system prefers dark. */
export function initialDark(): boolean {
  const s = saved();
  return s ? s === 'dark' : query().matches;
}

export function applyTheme(dark: boolean): void {
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
}

export function saveTheme(dark: boolean): void {
  try {
    localStorage.setItem(THEME_KEY, dark ? 'dark' : 'light');
  } catch {
    // Not kept: the next visit follows the system again.
  }
}

/** Calls `onChange` when the system's preference changes, while the person has chosen nothing here. */
export function followSystem(onChange: (dark: boolean) => void): () => void {
  const q = query();
  const listener = (e: MediaQueryListEvent) => {
    if (!saved()) onChange(e.matches);
  };
  q.addEventListener('change', listener);
  return () => q.removeEventListener('change', listener);
}
