// What the page says after an operator's action: in words (`approved apr_…: the write_file call
// runs once main reads it`), never the raw JSON-RPC answer; `busy` while the gateway has not
// answered, `error` when it refused, with its message.

/** One line of feedback. */
export interface Said {
  text: string;
  tone: 'busy' | 'ok' | 'error';
}

/** A done action's line. */
export function said(text: string): Said {
  return { text, tone: 'ok' };
}
