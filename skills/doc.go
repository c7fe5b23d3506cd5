// Package skills discovers Agent Skills and gives a model tools to use
// them.
//
// A skill is a folder holding a SKILL.md file: YAML front matter with a
// name and a description, then Markdown instructions. The folder may hold
// more files (scripts, references, templates) that the instructions point
// to. Skills are found in the roots given by the caller and in
// ./.agents/skills and ~/.agents/skills, each root holding one folder per
// skill (<root>/<name>/SKILL.md).
//
//	found, problems := skills.Discover(extraPaths, nil)
//	for _, p := range problems {
//		log.Printf("skill skipped: %v", p) // malformed, shadowed, missing
//	}
//	toolset, err := loop.Join(myTools, skills.Tools(found, nil))
//	if err != nil {
//		return err
//	}
//	system := "You are a helpful assistant.\n\n" + skills.PromptSection(found)
//	agent := loop.NewAgent(model, toolset, nil)
//	result, err := agent.Run(ctx, []llm.Message{llm.SystemMessage(system), llm.UserMessage(task)})
//
// Skills are disclosed progressively: the system prompt names each skill
// and says what it is for ([PromptSection]); the model calls load_skill to
// read the instructions of the one it needs, and read_skill for the files
// they mention. list_skills and search_skills help it find one. All the
// tools are read-only and confined to each skill's folder with an
// [os.Root].
package skills
