/** A tool of the agent that could not be set up; the chat goes on without it. */
export interface ToolWarning {
  tool: string;
  /** `mcp_unreachable`, `mcp_timeout`, `mcp_error`, `mcp_invalid_tool`, `mcp_too_many_tools`, `mcp_not_allowed`, `mcp_invalid_header`, `agent_unavailable`. */
  code: string;
  message: string;
}
