import { memo } from 'preact/compat';
import { useState } from 'preact/hooks';
import type { ActorEvent } from '../../src/protocol/events.js';
import { EventDescriber } from '../../src/client/event-text.js';
import { terminalText } from '../../src/client/terminal-text.js';
import type { StreamEvent } from './api.js';

// The events of the selected actor (or the whole tree), newest last, filtered by type; each row
// shows the event's key fields as `actorloop events` prints them (one describer for both: the
// tool and its arguments, the outcome and reason, bytes, tokens), and opens to its JSON as the log
// holds it (a redacted value reads `[redacted]`, as it came). The newest 300 that pass the filters
// are drawn. Text from the log (arguments, answers, file contents) is shown with its control
// characters written out, as on a terminal.

/** Each event's key fields, described once: by the event object, which the page never copies. */
const fieldsOf = new WeakMap<ActorEvent, string>();

/**
 * Describes the actor's events in log order (the describer numbers incarnations and names the
 * model of a step from the events before), each once.
 */
function describeAll(events: readonly StreamEvent[]): void {
  const last = events.at(-1)?.event;
  if (last === undefined || fieldsOf.has(last)) return;
  const d = new EventDescriber();
  for (const { event } of events) {
    if (fieldsOf.has(event)) d.note(event);
    else {
      d.note(event);
      fieldsOf.set(event, terminalText(d.fields(event)));
    }
  }
}

/**
 * The most rows drawn: an actor of thousands of events drawn whole costs the page its frames (its
 * paint and compositing, every frame, even when the list itself is not redrawn), and the newest
 * are what a person follows; the filters reach the older ones.
 */
const DRAWN_MAX = 300;

interface EventListProps {
  events: readonly StreamEvent[];
  names: Map<string, string>;
  /** The events are a tree's (each row names its actor); false: one actor's. */
  tree?: boolean;
}

/**
 * The list is drawn again only when its events or their actors' names changed: the page renders
 * on every burst of the tree's stream, and the selected actor's own events mostly stay as they were.
 * The events only ever grow or shrink at the end (a position of the log), so the count and the two
 * ends say whether they are the same.
 */
function sameList(a: EventListProps, b: EventListProps): boolean {
  if (a.events.length !== b.events.length || a.events[0] !== b.events[0] || a.events.at(-1) !== b.events.at(-1)) return false;
  const actors = new Set<string>();
  for (const e of b.events) actors.add(e.event.actor);
  for (const id of actors) if (a.names.get(id) !== b.names.get(id)) return false;
  return true;
}

/** The event list with its type filter. */
export const EventList = memo(function EventList({ events, names, tree = false }: EventListProps) {
  const [type, setType] = useState('');
  const [text, setText] = useState('');
  const [open, setOpen] = useState<string | null>(null);
  const types = [...new Set(events.map((e) => e.event.type))].sort();
  const shown = events.filter((e) => (type === '' || e.event.type === type || e.event.type.startsWith(`${type}/`)) && (text === '' || JSON.stringify(e.event).includes(text)));
  const groups = [...new Set(types.map((t) => t.split('/')[0]!))];
  const drawn = shown.length > DRAWN_MAX ? shown.slice(-DRAWN_MAX) : shown;
  describeAll(events);
  return (
    <section class="events" aria-label="events">
      <h2>Events <span class="count">{shown.length}/{events.length}</span></h2>
      <div class="filters">
        <select aria-label="event type" value={type} onChange={(e) => setType((e.target as HTMLSelectElement).value)}>
          <option value="">all types</option>
          {groups.map((g) => <option key={g} value={g}>{g}/*</option>)}
          {types.map((t) => <option key={t} value={t}>{t}</option>)}
        </select>
        <input aria-label="search events" placeholder="search" value={text} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
      </div>
      {drawn.length < shown.length && <p class="muted" data-testid="events-cut">the newest {drawn.length} of {shown.length} shown: filter by type or search to reach older ones</p>}
      <ol class="event-rows">
        {drawn.map((e) => {
          const key = `${e.event.actor}:${e.event.seq}`;
          return (
          <li key={key} class="event" data-type={e.event.type} data-seq={e.event.seq}>
            <button class="event-head" onClick={() => setOpen(open === key ? null : key)}>
              <span class="seq">#{e.event.seq}</span> <span class="at">{e.event.at.slice(11, 23)}</span> <span class="etype">{e.event.type}</span> <span class="fields">{fieldsOf.get(e.event) ?? ''}</span>
              {tree && <span class="who"> · {names.get(e.event.actor) ?? e.event.actor}</span>}
            </button>
            {open === key && <pre class="json">{JSON.stringify(e.event, null, 2)}</pre>}
          </li>
          );
        })}
      </ol>
    </section>
  );
}, sameList);
