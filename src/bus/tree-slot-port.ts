// The places of a tree (design §6b: `max_children_per_tree` counts the children running at once):
// one record per root, holding the children that hold a place and under which tokens. A place is
// taken before the spawn request (or follow-up) that needs it is committed and given back after
// the child's turn ends, so what the logs show running at once is always within what the record
// allowed. `createKvTreeSlots` (KV `tree_slots`) and `createMemoryTreeSlots` implement it.

/** One child holding a place: the tokens it holds it under (a spawn request, a follow-up), and when the first was taken. */
export interface SlotHolder {
  tokens: string[];
  atMs: number;
}

/** What a take says: the place is the child's, or the tree is full with these holders. */
export type SlotTake = { taken: true } | { taken: false; holders: Record<string, SlotHolder> };

/** The places of every tree, shared by every host of a deployment. */
export interface TreeSlotStore {
  /**
   * Takes a place in the tree for `childId` under `token`, unless `max` children hold one already.
   * A child that holds a place takes another token without a second place, and a token taken
   * again is taken once: a spawn retried after a crash neither counts twice nor is refused.
   */
  take(rootId: string, childId: string, token: string, max: number, nowMs: number): Promise<SlotTake>;
  /** Gives back the tokens (null: all) of a child; its place is free once it holds none. Idempotent. */
  release(rootId: string, childId: string, tokens: string[] | null): Promise<void>;
}

/** Error codes of tree places on the bus. */
export const TREE_SLOT_CODES = { failed: 'bus.tree_slots_failed' } as const;

/** The holders after a take, or null when the tree is full (`max` other children hold places). */
export function afterTakeSlot(holders: Record<string, SlotHolder>, childId: string, token: string, max: number, nowMs: number): Record<string, SlotHolder> | 'unchanged' | null {
  const mine = holders[childId];
  if (mine?.tokens.includes(token)) return 'unchanged';
  if (mine) return { ...holders, [childId]: { ...mine, tokens: [...mine.tokens, token] } };
  if (Object.keys(holders).length >= max) return null;
  return { ...holders, [childId]: { tokens: [token], atMs: nowMs } };
}

/** The holders after a release, or 'unchanged' when the child held none of the tokens. */
export function afterReleaseSlot(holders: Record<string, SlotHolder>, childId: string, tokens: string[] | null): Record<string, SlotHolder> | 'unchanged' {
  const mine = holders[childId];
  if (!mine) return 'unchanged';
  const left = tokens === null ? [] : mine.tokens.filter((t) => !tokens.includes(t));
  if (left.length === mine.tokens.length) return 'unchanged';
  const { [childId]: _gone, ...rest } = holders;
  return left.length === 0 ? rest : { ...rest, [childId]: { ...mine, tokens: left } };
}
