import type { RuntimeTool } from '../agent/runtime-tool.js';
import { updatePlanRuntime } from './update-plan.js';
import { askUserRuntime } from './questions.js';
import { stopRuntime } from './stop-decision.js';
import { loadSkillRuntime, memoryRuntime, memorySearchRuntime } from './knowledge-tools.js';
import { getGoalRuntime, updateGoalRuntime } from '../goals/goals.js';
import { spawnAgentRuntime } from '../tree/spawn-agent.js';
import { cancelJobRuntime, jobStatusRuntime, startJobRuntime, waitJobsRuntime } from './job-tools.js';
import { startWorkflowRuntime } from './workflow-tools.js';
import { interruptAgentRuntime, reportRuntime, sendMessageRuntime, waitAgentsRuntime } from '../tree/subagent-messages.js';

const TOOLS: Record<string, RuntimeTool> = {
  [updatePlanRuntime.name]: updatePlanRuntime,
  [askUserRuntime.name]: askUserRuntime,
  [stopRuntime.name]: stopRuntime,
  [getGoalRuntime.name]: getGoalRuntime,
  [updateGoalRuntime.name]: updateGoalRuntime,
  [spawnAgentRuntime.name]: spawnAgentRuntime,
  [sendMessageRuntime.name]: sendMessageRuntime,
  [reportRuntime.name]: reportRuntime,
  [waitAgentsRuntime.name]: waitAgentsRuntime,
  [interruptAgentRuntime.name]: interruptAgentRuntime,
  [loadSkillRuntime.name]: loadSkillRuntime,
  [memoryRuntime.name]: memoryRuntime,
  [memorySearchRuntime.name]: memorySearchRuntime,
  [startJobRuntime.name]: startJobRuntime,
  [jobStatusRuntime.name]: jobStatusRuntime,
  [waitJobsRuntime.name]: waitJobsRuntime,
  [cancelJobRuntime.name]: cancelJobRuntime,
  [startWorkflowRuntime.name]: startWorkflowRuntime,
};

/** The runtime's own implementation of a tool, if it has one. */
export function runtimeTool(name: string): RuntimeTool | undefined {
  return Object.prototype.hasOwnProperty.call(TOOLS, name) ? TOOLS[name] : undefined;
}
