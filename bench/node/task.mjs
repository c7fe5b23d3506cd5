// The benchmarks' task, as bench/internal/task defines it for the Go
// clients: the same prompts, tool and note text, flags and summary line.

export const System = 'You are a benchmark agent. Read the notes you are pointed to, then answer.';
export const Prompt = 'Read the notes of every turn, then summarise them.';
export const ToolName = 'read_file';
export const Description = 'Reads a file of the notes folder and returns its text.';
export const Marker = 'bench-tool-result';

// read returns the text of the note at path (task.NoteText in Go).
export function read(path) {
  let s = `${Marker}: ${path}\n`;
  for (let i = 1; i <= 6; i++) {
    s += `line ${i} of ${path}: the service listens on port 8080 and keeps its state in SQLite.\n`;
  }
  return s;
}

// parseFlags reads --base-url (default $OPENAI_BASE_URL), --model (default
// $OPENAI_MODEL or bench-model) and --runs.
export function parseFlags(argv) {
  const f = {
    baseURL: process.env.OPENAI_BASE_URL ?? '',
    model: process.env.OPENAI_MODEL || 'bench-model',
    runs: 1,
  };
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i].replace(/^--?/, '').split('=', 2);
    const value = inline ?? argv[++i];
    switch (name) {
      case 'base-url': f.baseURL = value; break;
      case 'model': f.model = value; break;
      case 'runs': f.runs = Number.parseInt(value, 10); break;
      default: throw new Error(`unknown flag ${argv[i]}`);
    }
  }
  if (!f.baseURL) throw new Error('no --base-url and no OPENAI_BASE_URL');
  if (!(f.runs >= 0)) throw new Error('--runs must not be negative');
  f.baseURL = f.baseURL.replace(/\/+$/, '');
  return f;
}

// main does the runs one after the other and prints the summary line that
// the driver checks; runOnce returns the final answer of one run.
export async function main(name, setup) {
  try {
    const f = parseFlags(process.argv.slice(2));
    const runOnce = await setup(f);
    const s = { runs: 0, answer_bytes: 0 };
    for (let i = 0; i < f.runs; i++) {
      const answer = await runOnce();
      s.runs++;
      s.answer_bytes += Buffer.byteLength(answer, 'utf8');
    }
    process.stdout.write(JSON.stringify(s) + '\n');
  } catch (err) {
    process.stderr.write(`${name}: ${err?.stack ?? err}\n`);
    process.exitCode = 1;
  }
}
