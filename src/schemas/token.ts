export const SCOPES = ['plants:read', 'plants:write', 'plants:admin'] as const;
export type Scope = (typeof SCOPES)[number];
export const DEFAULT_SCOPES: Scope[] = ['plants:read', 'plants:write'];

export function isScope(s: string): s is Scope {
  return (SCOPES as readonly string[]).includes(s);
}
