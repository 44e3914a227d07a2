# world: strategy
"""A test strategy in Python: asks the model, runs the tools it calls, and
finishes when the model answers without tools (or calls `terminate`)."""

from agentd.strategy import Agent, StrategyApi, strategy  # noqa: F401


@strategy(version="0.1.0", max_steps=8, system_prompt="You are a Python strategy.", special_tools=["terminate"])
def py_strategy(agent: Agent) -> str:
    """A tool-calling strategy written in Python."""
    cfg = agent.config()
    messages = agent.memory()
    if cfg.system_prompt:
        messages = [agent.system_message(cfg.system_prompt)] + messages
    reply = agent.chat(messages, tools=agent.tools())
    message = reply.message
    if not message.content and not message.tool_calls:
        message = agent.assistant_message("(no answer)")
    agent.add_message(message)
    if not message.tool_calls:
        agent.finish()
        return f"answered: {message.content}"
    results = []
    for call in message.tool_calls:
        text = agent.invoke_tool_text(call)
        agent.add_message(agent.tool_message(call, text))
        results.append(call.name)
        if call.name.lower() in [t.lower() for t in cfg.special_tools] and not text.startswith("Error:"):
            agent.finish()
    return f"python step {cfg.current_step}: called {', '.join(results)}"
