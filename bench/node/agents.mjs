// The benchmarks' task with the OpenAI Agents SDK (@openai/agents): an Agent
// with one zod-typed tool, run streamed over Chat Completions, tracing off.
//
//   node agents.mjs --base-url http://127.0.0.1:40123/v1 --runs 40
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import * as task from './task.mjs';

await task.main('agents', async (f) => {
  setTracingDisabled(true);
  setOpenAIAPI('chat_completions');
  setDefaultOpenAIClient(new OpenAI({ baseURL: f.baseURL, apiKey: 'bench', maxRetries: 0 }));
  const readFile = tool({
    name: task.ToolName,
    description: task.Description,
    parameters: z.object({ path: z.string().describe('the file to read') }),
    execute: async ({ path }) => task.read(path),
  });
  const agent = new Agent({ name: 'bench', instructions: task.System, model: f.model, tools: [readFile] });
  return async () => {
    const result = await run(agent, task.Prompt, { stream: true, maxTurns: 100 });
    for await (const _ of result) {
      // Drain the events, as a caller showing them would.
    }
    await result.completed;
    return result.finalOutput ?? '';
  };
});
