"""One step, in plain Python: it only calls methods of ``agent``, so
``make test`` runs it against a fake agent, no component needed."""


def step(agent) -> str:
    config = agent.config()
    messages = agent.memory()
    if config.system_prompt:
        messages = [agent.system_message(config.system_prompt)] + messages
    if config.next_step_prompt:
        messages = messages + [agent.user_message(config.next_step_prompt)]
    reply = agent.chat(messages, tools=agent.tools())
    message = reply.message
    if not message.content and not message.tool_calls:
        message = agent.assistant_message("(no answer)")
    agent.add_message(message)
    if not message.tool_calls:
        agent.finish()
        return message.content or ""
    special = [t.lower() for t in config.special_tools]
    results = []
    for call in message.tool_calls:
        # A tool's error is an observation for the model (`Error: ...`).
        text = agent.invoke_tool_text(call)
        agent.add_message(agent.tool_message(call, text))
        results.append(f"{call.name}: {text}")
        if call.name.lower() in special:
            agent.finish()
    return "\n".join(results)
