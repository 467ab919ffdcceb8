#!/usr/bin/env python3
"""Reference model of Hermes Agent's ShareGPT conversion, used by the Go tests.

The Go package ``schemas`` must write exactly the bytes Hermes writes. This
script restates Hermes' rules in Python so that the real ``json.loads`` and
``json.dumps`` are the judges of every byte. It is written from the rules
(trajectory conversion, tool list rendering, scratchpad tags, tool-result
success judgement), not copied from Hermes.

Modes (all output is UTF-8, one line per item):

  hermes_ref.py convert [--flatten] FILE...
                                  one line per FILE:
                                  {"file": <basename>, "conversations": [...]}
                                  (--flatten: content lists joined into text)
  hermes_ref.py dumps             stdin: lines of "x" + base64 of JSON text;
                                  stdout: base64 of json.dumps(json.loads(text))
                                  or ERR per line
  hermes_ref.py judge             stdin: lines of "x" + base64 of a tool result;
                                  stdout: 1 (success) or 0 (failure) per line

Decisions hermes-pipe makes where Python has no answer (documented in
schemas/pyjson.go) are applied here too, at the edges only:
invalid UTF-8 input is decoded with errors="replace", and lone surrogates in
the output become U+FFFD.
"""

import base64
import json
import os
import re
import sys

# --- Hermes' rules -----------------------------------------------------------

SYSTEM_HEAD = (
    "You are a function calling AI model. You are provided with function signatures within <tools> </tools> XML tags. "
    "You may call one or more functions to assist with the user query. If available tools are not relevant in assisting "
    "with user query, just respond in natural conversational language. Don't make assumptions about what values to plug "
    "into functions. After calling & executing the functions, you will be provided with function results within "
    "<tool_response> </tool_response> XML tags. Here are the available tools:\n"
    "<tools>\n"
)
SYSTEM_TAIL = (
    "\n</tools>\n"
    "For each function call return a JSON object, with the following pydantic model json schema for each:\n"
    "{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': 'Name', 'type': 'string'}, "
    "'arguments': {'title': 'Arguments', 'type': 'object'}}, 'required': ['name', 'arguments']}\n"
    "Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n"
    "Example:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n</tool_call>"
)


def tools_json(tools):
    if not tools:
        return "[]"
    rendered = []
    for tool in tools:
        fn = tool["function"]
        rendered.append({
            "name": fn["name"],
            "description": fn.get("description", ""),
            "parameters": fn.get("parameters", {}),
            "required": None,
        })
    return json.dumps(rendered, ensure_ascii=False)


def scratchpad_to_think(text):
    if not text or "<REASONING_SCRATCHPAD>" not in text:
        return text
    text = text.replace("<REASONING_SCRATCHPAD>", "<think>")
    return text.replace("</REASONING_SCRATCHPAD>", "</think>")


def think_prefix(msg):
    reasoning = msg.get("reasoning")
    if reasoning and reasoning.strip():
        return "<think>\n" + reasoning + "\n</think>\n"
    return ""


def with_think(text):
    if "<think>" in text:
        return text
    return "<think>\n</think>\n" + text


def gpt_with_calls(msg):
    out = think_prefix(msg)
    content = msg.get("content")
    if content and content.strip():
        out += scratchpad_to_think(content) + "\n"
    for call in msg["tool_calls"]:
        raw = call["function"]["arguments"]
        if isinstance(raw, str):
            try:
                args = json.loads(raw)
            except json.JSONDecodeError:
                args = {}
        else:
            args = raw
        block = json.dumps({"name": call["function"]["name"], "arguments": args}, ensure_ascii=False)
        out += "<tool_call>\n" + block + "\n</tool_call>\n"
    return with_think(out).rstrip()


def tool_block(msg, tool_msg, position):
    content = tool_msg["content"]
    try:
        if content.strip().startswith(("{", "[")):
            content = json.loads(content)
    except (json.JSONDecodeError, AttributeError):
        pass
    calls = msg["tool_calls"]
    name = calls[position]["function"]["name"] if position < len(calls) else "unknown"
    payload = json.dumps(
        {"tool_call_id": tool_msg.get("tool_call_id", ""), "name": name, "content": content},
        ensure_ascii=False,
    )
    return "<tool_response>\n" + payload + "\n</tool_response>"


IMAGE_PARTS = {"image_url", "image", "input_image"}


def is_multimodal(value):
    return isinstance(value, dict) and value.get("_multimodal") is True and isinstance(value.get("content"), list)


def multimodal_summary(value):
    if value.get("text_summary"):
        return str(value["text_summary"])
    parts = [str(p.get("text", "")) for p in value.get("content") or []
             if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(parts) if parts else "[multimodal tool result]"


def normalize_msg(msg):
    """Hermes' trajectory normaliser: multimodal tool results become their
    text summary, image parts of a content list become a [screenshot] part."""
    content = msg.get("content")
    if is_multimodal(content):
        return {**msg, "content": multimodal_summary(content)}
    if isinstance(content, list):
        return {**msg, "content": [
            {"type": "text", "text": "[screenshot]"} if isinstance(p, dict) and p.get("type") in IMAGE_PARTS else p
            for p in content
        ]}
    return msg


def trajectory(messages, user_query, tools):
    messages = [normalize_msg(m) for m in messages]
    turns = [
        {"from": "system", "value": SYSTEM_HEAD + tools_json(tools) + SYSTEM_TAIL},
        {"from": "human", "value": user_query},
    ]
    i = 1
    while i < len(messages):
        msg = messages[i]
        role = msg["role"]
        if role == "assistant" and msg.get("tool_calls"):
            turns.append({"from": "gpt", "value": gpt_with_calls(msg)})
            blocks = []
            j = i + 1
            while j < len(messages) and messages[j]["role"] == "tool":
                blocks.append(tool_block(msg, messages[j], len(blocks)))
                j += 1
            if blocks:
                turns.append({"from": "tool", "value": "\n".join(blocks)})
                i = j - 1
        elif role == "assistant":
            text = think_prefix(msg) + scratchpad_to_think(msg["content"] or "")
            turns.append({"from": "gpt", "value": with_think(text).strip()})
        elif role == "user":
            turns.append({"from": "human", "value": msg["content"]})
        i += 1
    return turns


def tool_succeeded(content):
    ok = True
    try:
        data = json.loads(content) if isinstance(content, str) else content
        if isinstance(data, dict):
            if "error" in data and data["error"] is not None:
                ok = False
            if "content" in data and isinstance(data["content"], dict):
                if data["content"].get("error") is not None:
                    ok = False
            if data.get("success") is False:
                ok = False
    except (json.JSONDecodeError, ValueError, TypeError):
        if not content:
            ok = False
        elif content.strip().lower().startswith("error:"):
            ok = False
    return ok


# --- hermes-pipe's input adapter (OpenAI line -> Hermes message list) --------
#
# Content stays as the transcript holds it (a string, a list of parts, or a
# multimodal tool result), so Hermes' normaliser above judges lists and
# multimodal results. Two adapter decisions: an assistant message's list is
# flattened (Hermes fails on it), and with --flatten every list is.


def flatten_content(content):
    if content is None:
        return ""
    if isinstance(content, (str, dict)):
        return content
    texts = []
    for part in content:
        texts.append("[screenshot]" if part["type"] in IMAGE_PARTS else part["text"])
    return "\n".join(texts)


def adapt(line, flatten):
    messages = []
    for m in line["messages"]:
        role = "system" if m["role"] == "developer" else m["role"]
        content = m.get("content")
        if content is None:
            content = ""
        if flatten or role == "assistant":
            content = flatten_content(content)
        msg = {"role": role, "content": content}
        msg["reasoning"] = m.get("reasoning") or m.get("reasoning_content") or ""
        if m.get("tool_call_id") is not None:
            msg["tool_call_id"] = m["tool_call_id"]
        calls = []
        for c in m.get("tool_calls") or []:
            args = c["function"].get("arguments")
            calls.append({"id": c.get("id") or "", "function": {
                "name": c["function"]["name"],
                "arguments": "" if args is None else args,
            }})
        if calls:
            msg["tool_calls"] = calls
        messages.append(msg)
    while messages and messages[0]["role"] == "system":
        messages.pop(0)
    tools = []
    for t in line.get("tools") or []:
        fn = dict(t["function"])
        if fn.get("description") is None:
            fn["description"] = ""
        tools.append({"function": fn})
    return messages, tools


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(text):
    return LONE_SURROGATE.sub("\ufffd", text)


def convert_file(path, flatten):
    with open(path, "rb") as f:
        line = json.loads(f.read().decode("utf-8", "replace"))
    messages, tools = adapt(line, flatten)
    # The transcript's first message is the user query (Hermes is given the
    # prompt separately; here it is that message, normalised).
    turns = trajectory(messages, normalize_msg(messages[0])["content"], tools)
    out = json.dumps({"file": os.path.basename(path), "conversations": turns}, ensure_ascii=False)
    return clean(out)


def main():
    mode = sys.argv[1]
    out = sys.stdout.buffer
    if mode == "convert":
        args = sys.argv[2:]
        flatten = bool(args) and args[0] == "--flatten"
        for path in args[1:] if flatten else args:
            out.write(convert_file(path, flatten).encode("utf-8") + b"\n")
    elif mode == "dumps":
        for raw in sys.stdin.buffer.read().split(b"\n"):
            if not raw:
                continue
            text = base64.b64decode(raw[1:]).decode("utf-8", "replace")
            try:
                result = clean(json.dumps(json.loads(text), ensure_ascii=False))
                out.write(base64.b64encode(result.encode("utf-8")) + b"\n")
            except Exception:  # JSONDecodeError, ValueError (int digits), RecursionError
                out.write(b"ERR\n")
    elif mode == "judge":
        for raw in sys.stdin.buffer.read().split(b"\n"):
            if not raw:
                continue
            text = base64.b64decode(raw[1:]).decode("utf-8", "replace")
            out.write(b"1\n" if tool_succeeded(text) else b"0\n")
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
