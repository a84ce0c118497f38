import type { Logger } from 'pino';

/**
 * A child logger made on first use. A pino child is an object whose prototype is its parent, so
 * each one gets hidden classes of its own; a host of a thousand parked agents that
 * rarely log should not pay that up front.
 */
export function lazyChild(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | null = null;
  return new Proxy({} as Logger, {
    get(_target, key) {
      child ??= parent.child(bindings);
      const value = (child as unknown as Record<PropertyKey, unknown>)[key];
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(child) : value;
    },
  });
}
