// oidc-provider's storage adapter, kept in one JSON file of the state directory so that
// registered clients, grants and refresh tokens survive a restart of `make run` (the library's
// own adapter keeps them in memory only). Development volumes are small: every change rewrites
// the file, atomically.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

const now = () => Math.floor(Date.now() / 1000);

export function fileStore(path) {
  const entries = new Map(); // "Model:id" -> { payload, expiresAt }
  if (existsSync(path)) {
    for (const [key, entry] of Object.entries(JSON.parse(readFileSync(path, 'utf8')))) {
      if (!entry.expiresAt || entry.expiresAt > now()) entries.set(key, entry);
    }
  }

  const save = () => {
    const temporary = `${path}.tmp`;
    writeFileSync(temporary, JSON.stringify(Object.fromEntries(entries)), { mode: 0o600 });
    renameSync(temporary, path);
  };

  const live = (key) => {
    const entry = entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt && entry.expiresAt <= now()) {
      entries.delete(key);
      return undefined;
    }
    return entry.payload;
  };

  const findWhere = (model, test) => {
    for (const key of entries.keys()) {
      if (key.startsWith(`${model}:`)) {
        const payload = live(key);
        if (payload && test(payload)) return payload;
      }
    }
    return undefined;
  };

  return class FileAdapter {
    constructor(model) {
      this.model = model;
    }

    key(id) {
      return `${this.model}:${id}`;
    }

    async upsert(id, payload, expiresIn) {
      entries.set(this.key(id), { payload, expiresAt: expiresIn ? now() + expiresIn : null });
      save();
    }

    async find(id) {
      return live(this.key(id));
    }

    async findByUid(uid) {
      return findWhere(this.model, (payload) => payload.uid === uid);
    }

    async findByUserCode(userCode) {
      return findWhere(this.model, (payload) => payload.userCode === userCode);
    }

    async consume(id) {
      const payload = live(this.key(id));
      if (payload) {
        payload.consumed = now();
        save();
      }
    }

    async destroy(id) {
      entries.delete(this.key(id));
      save();
    }

    async revokeByGrantId(grantId) {
      for (const [key, entry] of entries) {
        if (entry.payload.grantId === grantId) entries.delete(key);
      }
      save();
    }
  };
}
