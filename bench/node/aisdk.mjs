// The benchmarks' task with the Vercel AI SDK (ai + @ai-sdk/openai):
// streamText over the Chat Completions model with one zod-typed tool, looping
// until the model stops calling it.
//
//   node aisdk.mjs --base-url http://127.0.0.1:40123/v1 --runs 40
import { streamText, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import * as task from './task.mjs';

await task.main('aisdk', async (f) => {
  const openai = createOpenAI({ baseURL: f.baseURL, apiKey: 'bench' });
  const model = openai.chat(f.model);
  const tools = {
    [task.ToolName]: tool({
      description: task.Description,
      inputSchema: z.object({ path: z.string().describe('the file to read') }),
      execute: async ({ path }) => task.read(path),
    }),
  };
  return async () => {
    const result = streamText({
      model,
      system: task.System,
      prompt: task.Prompt,
      tools,
      stopWhen: stepCountIs(100),
      maxRetries: 0,
    });
    let last = '';
    for await (const part of result.fullStream) {
      if (part.type === 'start-step') last = '';
      else if (part.type === 'text-delta') last += part.text;
      else if (part.type === 'error') throw part.error;
    }
    return last;
  };
});
