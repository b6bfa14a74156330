/** What `atrium apply` reports it did: its lines, the keys it made, and every object it applied. */

/** The kinds of object a setup file applies, with the key each has in `ids`. */
const IDS_KEYS = {
  organization: 'organizations',
  user: 'users',
  workspace: 'workspaces',
  apiKey: 'apiKeys',
  agent: 'agents',
  project: 'projects',
} as const;

export type ObjectKind = keyof typeof IDS_KEYS;

/**
 * One object the file named, with the ids of what it belongs to: a name is unique only there
 * (two workspaces each have an agent "Helper"; two projects given ids may even share a name).
 */
export interface AppliedObject {
  kind: ObjectKind;
  id: string;
  /** `title` for agents, `email` for users, else `name`. */
  name: string;
  organization?: string;
  workspace?: string;
}

export interface ApplyReport {
  created: string[];
  updated: string[];
  /** Plaintext of every key this run created (or re-keyed), by key name. Shown once. */
  keys: Record<string, string>;
  objects: AppliedObject[];
}

/**
 * `ids` of `apply --json`, as it was before `objects`: each kind's ids by name. A name that names
 * two objects of a kind here is left out (it held one of them, whichever came last); `objects`
 * lists them both.
 */
export function idsByName(objects: AppliedObject[]): Record<string, Record<string, string>> {
  const ids: Record<string, Record<string, string>> = {};
  const ambiguous: AppliedObject[] = [];
  for (const object of objects) {
    // No prototype: a project may be named "__proto__".
    const byName = (ids[IDS_KEYS[object.kind]] ??= Object.create(null) as Record<string, string>);
    const seen = byName[object.name];
    if (seen !== undefined && seen !== object.id) ambiguous.push(object);
    else byName[object.name] = object.id;
  }
  for (const object of ambiguous) delete ids[IDS_KEYS[object.kind]][object.name];
  return ids;
}
