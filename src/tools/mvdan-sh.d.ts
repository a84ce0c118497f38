// Minimal types for the parts of mvdan-sh (a GopherJS build of mvdan.cc/sh/v3/syntax) that
// shell-command.ts reads. Node fields mirror the Go structs; only the ones read are declared.
declare module 'mvdan-sh' {
  /** A source position; offsets count UTF-8 bytes, not UTF-16 code units. */
  interface ShPos {
    Offset(): number;
    Line(): number;
    Col(): number;
  }

  /** Any syntax node: its kind is `syntax.NodeType(node)`. */
  interface ShNode {
    Pos(): ShPos;
    End(): ShPos;
  }

  /** A parsed script. */
  interface ShFile extends ShNode {
    Stmts: ShNode[];
  }

  /** A simple command: `X=1 prog args`. */
  interface ShCallExpr extends ShNode {
    Args: ShWord[];
  }

  /** One shell word, made of literal, quoted and expansion parts. */
  interface ShWord extends ShNode {
    Parts: ShWordPart[];
  }

  /** A word part: Lit, SglQuoted, DblQuoted, ParamExp, CmdSubst, ArithmExp, ProcSubst, ExtGlob, BraceExp. */
  interface ShWordPart extends ShNode {
    /** Lit and SglQuoted: the raw text (a Lit keeps its backslashes). */
    Value?: string;
    /** SglQuoted and DblQuoted: `$'…'` / `$"…"`. */
    Dollar?: boolean;
    /** DblQuoted: its parts. */
    Parts?: ShWordPart[];
  }

  /** A redirection: `2>> file`. */
  interface ShRedirect extends ShNode {
    /** The operator as a token number (see the probe in shell-command.ts). */
    Op: number;
    Word: ShWord | null;
  }

  /** A parser; `Parse` throws an object whose `Error()` is `name:line:col: message`. */
  interface ShParser {
    Parse(src: string, name: string): ShFile;
  }

  /** The `syntax` package. */
  interface ShSyntax {
    NewParser(...opts: unknown[]): ShParser;
    NodeType(node: ShNode): string;
    Walk(node: ShNode, visit: (node: ShNode | null) => boolean): void;
    /** Splits brace expansions of a word into BraceExp parts (it mutates the word). */
    SplitBraces(word: ShWord): ShWord;
  }

  const sh: { syntax: ShSyntax };
  export default sh;
  export type { ShCallExpr, ShFile, ShNode, ShParser, ShRedirect, ShSyntax, ShWord, ShWordPart };
}
