import { BusError } from '../protocol/errors.js';
import { DirectoryEntrySchema, type ActorDirectory, type DirectoryEntry } from './directory.js';

/**
 * The actor directory in this process's memory: entries validated as on KV `actors`, each put a
 * new revision, listed in key order. For tests and embedders that need no NATS.
 */
export function createMemoryDirectory(): ActorDirectory {
  const entries = new Map<string, string>();
  let revision = 0;
  return {
    async put(entry) {
      const parsed = DirectoryEntrySchema.safeParse(entry);
      if (!parsed.success) {
        throw new BusError('bus.invalid_entry', `invalid directory entry: ${parsed.error.issues[0]?.message}`);
      }
      // stored as bytes, as KV does: a caller's later change to its object changes nothing here
      entries.set(entry.actorId, JSON.stringify(parsed.data));
      return ++revision;
    },
    async get(actorId) {
      const raw = entries.get(actorId);
      return raw === undefined ? undefined : (JSON.parse(raw) as DirectoryEntry);
    },
    async list() {
      return [...entries.keys()].sort().map((k) => JSON.parse(entries.get(k)!) as DirectoryEntry);
    },
  };
}
