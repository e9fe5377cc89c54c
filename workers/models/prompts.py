"""A task's question as the text and tokens the model reads (the config's `prompt` section).

An instruct model was trained on conversations written in its chat template; a raw question is off its
distribution (a real model answers it with off-task text, and RL then has no signal). So for a model with a chat
template the question, wrapped with the answer instruction, is the user's turn, after an optional system message,
rendered by the tokenizer's own `apply_chat_template` with the assistant's header last; the completion ends at the
template's end-of-turn token. The tiny model, which has no template, reads its question as it is.

    prompts = Prompts(tokenizer, cfg.prompt, task.instruction)
    prompts.render("What is 2+3?")   # '<|im_start|>user\\nWhat is 2+3?\\n\\nSolve ... after ####.<|im_end|>...'
    prompts.encode("What is 2+3?")   # its token ids, the chat template's own special tokens included
"""

from __future__ import annotations

from workers.errors import ConfigError

MAX_ENCODED = 1 << 16  # prompts kept encoded: a file task's whole training set, at most
END_MARKER = "ROLLOUTLABENDMARKER"  # an assistant message whose end the end-of-turn token is looked for after


def user_turn(template: str | None, instruction: str, question: str) -> str:
    """The question in the prompt's template (or followed by the instruction after a blank line)."""
    if template is not None:
        return template.replace("{question}", question).replace("{instruction}", instruction)
    return f"{question.rstrip()}\n\n{instruction}" if instruction else question


def chat_messages(system: str | None, template: str | None, instruction: str, question: str, examples=()) -> list[dict]:
    """The conversation a chat prompt renders: the system message, if any, the worked examples' messages
    (prompt.examples), and the user's turn."""
    messages = [{"role": "system", "content": system}] if system else []
    shown = [{"role": message.role, "content": message.content} for example in examples for message in example]
    return [*messages, *shown, {"role": "user", "content": user_turn(template, instruction, question)}]


def plain_text(system: str | None, template: str | None, instruction: str, question: str, examples=()) -> str:
    """The system message, a blank line, the worked examples a line each (their messages run together, as the
    tiny model's episodes are written), then the user's turn."""
    lines = ["".join(message.content for message in example) for example in examples]
    user = "\n".join([*lines, user_turn(template, instruction, question)])
    return f"{system}\n\n{user}" if system else user


def task_instruction(prompt_cfg, task_instruction: str, chat: bool) -> str:
    """The instruction said: prompt.instruction if set, else the task's own to a chat model and none to plain text
    (which stays as it is unless one is given)."""
    if prompt_cfg.instruction is not None:
        return prompt_cfg.instruction
    return task_instruction if chat else ""


def uses_chat(prompt_format: str, has_template: bool) -> bool:
    """Whether prompts go through the chat template: 'chat', or 'auto' with a model that has one."""
    return prompt_format == "chat" or (prompt_format == "auto" and has_template)


class Prompts:
    def __init__(self, tokenizer, prompt_cfg, instruction: str, source: str = "the model"):
        self.tokenizer = tokenizer
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.chat = uses_chat(prompt_cfg.format, has_template)
        if self.chat and not has_template:
            raise ConfigError(
                f"prompt.format: the tokenizer of {source} has no chat template; set prompt.format to 'plain'",
                {"prompt.format": f"the tokenizer of {source} has no chat template; use 'plain'"},
            )
        self.system = prompt_cfg.system
        self.template = prompt_cfg.template
        self.examples = prompt_cfg.examples
        self.instruction = task_instruction(prompt_cfg, instruction, self.chat)
        # a step encodes the same prompts over and over (groups, evaluations) and the inspector shows their text:
        # each is rendered and encoded once. A plain dict, so that a copy of the policy (the asynchronous rollout
        # copy, a Ray actor's) encodes with its own tokenizer
        self._prepared: dict[str, tuple[str, tuple[int, ...]]] = {}

    def render(self, question: str) -> str:
        """The prompt's text as the model reads it (what a stored sample shows)."""
        return self.prepared(question)[0]

    def encode(self, question: str) -> tuple[int, ...]:
        """Token ids; a chat template writes its own start tokens, plain text gets the tokenizer's."""
        return self.prepared(question)[1]

    def prepared(self, question: str) -> tuple[str, tuple[int, ...]]:
        """The question's rendered text and its token ids, made on first use."""
        done = self._prepared.get(question)
        if done is None:
            text = self.rendered(question)
            done = text, tuple(self.tokenizer(text, add_special_tokens=not self.chat)["input_ids"])
            if len(self._prepared) < MAX_ENCODED:
                self._prepared[question] = done
        return done

    def rendered(self, question: str) -> str:
        if not self.chat:
            return plain_text(self.system, self.template, self.instruction, question, self.examples)
        messages = chat_messages(self.system, self.template, self.instruction, question, self.examples)
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def observation_ids(self, observation: str, turn_closed: bool) -> list[int]:
        """The token ids of an environment's answer to the policy's turn, as the model reads it before its next turn.

        Plain prompts: the text as it is. Chat prompts: a user message in the template, and the assistant's header
        after it, as the template writes them after an assistant message; `turn_closed` says whether the policy's
        turn already ended with the end-of-turn token (else it was cut at a stop string and the template's end of
        the assistant message comes first)."""
        if not self.chat:
            return self.tokenizer(observation, add_special_tokens=False)["input_ids"]
        before = [{"role": "user", "content": "q"}, {"role": "assistant", "content": END_MARKER}]
        after = [*before, {"role": "user", "content": observation}]
        text = self.tokenizer.apply_chat_template(after, add_generation_prompt=True, tokenize=False)
        wrapped = text.rpartition(END_MARKER)[2]  # the assistant message's end, the observation, the next header
        ids = self.tokenizer(wrapped, add_special_tokens=False)["input_ids"]
        end_of_turn = self.end_of_turn_id()
        if turn_closed and end_of_turn is not None and end_of_turn in ids:
            ids = ids[ids.index(end_of_turn) + 1 :]
        return ids

    def end_of_turn_id(self) -> int | None:
        """The token that ends the assistant's turn in the chat template (ChatML's <|im_end|>, Llama 3's <|eot_id|>):
        the first special token the template writes after an assistant message. None for plain prompts, or when
        the template writes none there."""
        if not self.chat:
            return None
        turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": END_MARKER}]
        text = self.tokenizer.apply_chat_template(turns, tokenize=False)
        _, found, after = text.rpartition(END_MARKER)
        special = set(self.tokenizer.all_special_ids) | set(getattr(self.tokenizer, "added_tokens_decoder", {}))
        ids = self.tokenizer(after, add_special_tokens=False)["input_ids"] if found else []
        return next((i for i in ids if i in special), None)
