"""What the model is told of the project it works in: the instruction files (`AGENTS.md`),
Agent Skills (`SKILL.md`), prompt files that become slash commands, and the system prompt
they are assembled into. Reads files only: it knows no session, tool or protocol."""
