import type { LiveDelta } from '../client/live.js';

/** Where `StreamedText` writes: the model's text as it comes, and notes about it. */
export interface StreamSink {
  /** A piece of the model's text (part of a line, or several lines). */
  text(chunk: string): void;
  /** The text written so far is done: its last line, if open, is ended. */
  endText(): void;
  /** A line about the text above it (it was not accepted, it was refused). */
  note(line: string): void;
}

interface Stream {
  /** What of it is on the screen. */
  shown: string;
  /** Not shown at all: the watch started while it was under way, so its start was missed. */
  hidden: boolean;
}

/**
 * The model's text on a terminal: streamed from the live deltas as it arrives, squared with the
 * log, which is the truth. Live deltas are best effort (core NATS) and carry no attempt ID, so the
 * committed events frame them: the deltas between an `attempt/start` and its outcome are that
 * attempt's. The supervisor sends an attempt's deltas before its outcome's commit on one
 * connection, so they arrive first; those that arrive after an attempt ended and before the next
 * `attempt/start` reached this follower are the next attempt's, held until it starts. Each
 * committed outcome settles what is on the screen:
 *
 * - `assistant/accepted`: its text is what the model said. Shown already: nothing more. Shown in
 *   part (deltas missed at the end): the rest. Not shown: the whole, except a final answer, which
 *   the turn's end prints anyway.
 * - an attempt that ends failed / aborted / interrupted after streaming: said to be not accepted
 *   (a retry streams again).
 */
export class StreamedText {
  /** The attempt under way (started, its outcome not committed yet); null between attempts. */
  private stream: Stream | null = null;
  /** The attempt ended (succeeded): its accepted or refused output is committed next. */
  private ending: Stream | null = null;
  /** Deltas that came between attempts: the next attempt's, shown once it starts. */
  private early: LiveDelta[] = [];

  constructor(private readonly sink: StreamSink) {}

  /**
   * A model attempt is in flight as the watch starts: its stream is joined mid-way, so it is not
   * shown (its committed text is, when it comes).
   */
  joinedMidStream(): void {
    this.stream = { shown: '', hidden: true };
  }

  /** An `attempt/start` is committed: the deltas from now on are its own. */
  attemptStarted(): void {
    this.stream = { shown: '', hidden: false };
    const early = this.early;
    this.early = [];
    for (const d of early) this.delta(d);
  }

  /** One live delta. */
  delta(d: LiveDelta): void {
    const s = this.stream;
    if (!s) {
      this.early.push(d);
      return;
    }
    if (s.hidden) return;
    switch (d.type) {
      case 'text_delta':
        if (d.text === '') return;
        s.shown += d.text;
        this.sink.text(d.text);
        return;
      case 'tool_call_delta':
      case 'done':
        // the text part is over: tool calls are shown from the log
        if (s.shown !== '') this.sink.endText();
        return;
    }
  }

  /**
   * The attempt's `attempt/end` is committed. `succeeded`: its output follows (accepted or
   * refused). Otherwise (failed, aborted, interrupted, overflow) what streamed was not accepted,
   * and is said so; returns true when it said so.
   */
  attemptEnded(outcome: string, why: string): boolean {
    const s = this.stream;
    this.stream = null;
    if (outcome === 'succeeded') {
      this.ending = s;
      return false;
    }
    if (!s || s.shown === '') return false;
    this.sink.endText();
    this.sink.note(`(the text above was not accepted: attempt ${outcome}${why})`);
    return true;
  }

  /**
   * The attempt's accepted text is committed. `final`: a step's answer with no tool calls, which
   * the turn's end prints when it was not shown here. Returns the text now on the screen for it
   * (null: none shown).
   */
  accepted(content: string | null, final: boolean): string | null {
    const shown = this.settle()?.shown ?? '';
    const text = content ?? '';
    if (shown === '') {
      if (text === '' || final) return null;
      this.sink.text(text);
      this.sink.endText();
      return text;
    }
    this.sink.endText();
    if (shown === text) return text;
    if (text.startsWith(shown)) {
      this.sink.text(text.slice(shown.length));
      this.sink.endText();
      return text;
    }
    // what streamed is not the start of what was committed: the committed text is a preview of a
    // long one (the stream has it whole), or its start was missed; printing it again would show
    // the text twice
    return shown;
  }

  /** The attempt's answer was refused (it failed the output schema); the model is asked again. */
  refused(reason: string): void {
    const s = this.settle();
    if (s && s.shown !== '') this.sink.endText();
    this.sink.note(`(answer refused: ${reason}; the model answers again)`);
  }

  /** The stream of the output just committed (its attempt/end came first, in the same commit). */
  private settle(): Stream | null {
    const s = this.ending ?? this.stream;
    this.ending = null;
    if (s === this.stream) this.stream = null;
    return s;
  }
}
