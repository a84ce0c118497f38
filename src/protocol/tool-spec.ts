/**
 * A tool as the model sees it: name, description and JSON Schema of its input. Here, not in
 * `model/`, because the tool registry builds it and a model adapter sends it.
 */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}
