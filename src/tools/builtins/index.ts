import type { Redactor } from '../redact.js';
import type { ToolDefinition } from '../tool.js';
import { applyPatchTool } from './apply-patch.js';
import { askUserTool } from './ask-user.js';
import { getGoalTool, updateGoalTool } from './goal-tools.js';
import { createArtifactReadTool } from './artifact-read.js';
import { listDirTool } from './list-dir.js';
import { readFileTool } from './read-file.js';
import { searchTool } from './search.js';
import { shellTool } from './shell.js';
import { stopTool } from './stop.js';
import { updatePlanTool } from './update-plan.js';
import { writeFileTool } from './write-file.js';
import { loadSkillTool, memorySearchTool, memoryTool } from './knowledge-tools.js';
import { interruptAgentTool, reportTool, sendMessageTool, spawnAgentTool, waitAgentsTool } from './subagent-tools.js';
import { cancelJobTool, jobStatusTool, startJobTool, waitJobsTool } from './job-tools.js';
import { startWorkflowTool } from './workflow-tools.js';

export { applyPatchTool } from './apply-patch.js';
export { askUserTool } from './ask-user.js';
export { getGoalTool, updateGoalTool, MODEL_GOAL_PHASES, type GetGoalInput, type UpdateGoalInput } from './goal-tools.js';
export { artifactReadTool, createArtifactReadTool } from './artifact-read.js';
export { listDirTool } from './list-dir.js';
export { readFileTool } from './read-file.js';
export { searchTool } from './search.js';
export { shellTool } from './shell.js';
export { stopTool, type StopInput } from './stop.js';
export { formatPlan, updatePlanTool, type Plan, type UpdatePlanInput } from './update-plan.js';
export { writeFileTool } from './write-file.js';
export { loadSkillTool, memoryTool, memorySearchTool, LOAD_SKILL, MEMORY, MEMORY_SEARCH } from './knowledge-tools.js';
export { startJobTool, jobStatusTool, waitJobsTool, cancelJobTool, JOB_TOOLS, MAX_JOB_TIMEOUT_SECONDS } from './job-tools.js';
export { startWorkflowTool, type StartWorkflowInput } from './workflow-tools.js';
export { spawnAgentTool, sendMessageTool, reportTool, waitAgentsTool, interruptAgentTool, PARENT_TOOLS, CHILD_TOOLS } from './subagent-tools.js';

/**
 * The built-in tools: read_file, list_dir, search, write_file, apply_patch, shell, artifact_read,
 * update_plan (run by the agent runtime itself: it writes the agent's plan to its log).
 * ask_user (run by the runtime: it waits for a person), stop (run by the runtime: the model's
 * decision to end the turn `stopped`), get_goal and update_goal (run by the runtime: the agent's
 * goal lives in its log; a turn sees them only when it has a goal).
 * spawn_agent, send_message, wait_agents, interrupt_agent and report (run by the runtime: a tree of
 * agents talking through their inboxes; `report` only a child sees).
 * load_skill, memory and memory_search (run by the runtime: skills and memory files it records
 * what the model was given of).
 * start_job, job_status, wait_jobs, cancel_job and start_workflow (run by the runtime: background
 * jobs, and workflow runs whose nodes are jobs).
 * `redactor` masks secrets in artifact hex dumps with the pipeline's configured values too.
 */
export function builtinTools(opts: { redactor?: Redactor } = {}): ToolDefinition<any>[] {
  return [
    readFileTool,
    listDirTool,
    searchTool,
    writeFileTool,
    applyPatchTool,
    shellTool,
    createArtifactReadTool(opts.redactor ? { redactor: opts.redactor } : {}),
    updatePlanTool,
    askUserTool,
    stopTool,
    getGoalTool,
    updateGoalTool,
    spawnAgentTool,
    sendMessageTool,
    waitAgentsTool,
    interruptAgentTool,
    reportTool,
    loadSkillTool,
    memoryTool,
    memorySearchTool,
    startJobTool,
    jobStatusTool,
    waitJobsTool,
    cancelJobTool,
    startWorkflowTool,
  ];
}
