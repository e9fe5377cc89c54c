"""The grid task draws solvable puzzles whose minimum moves are right, and its environment answers scripted turns
with the boards, rewards, ends and state keys its card promises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.configs import small_config
from tests.offline.engine.test_environments import ScriptedTurns, assert_observations_get_no_gradient
from workers.config import resolve
from workers.environments import ENVIRONMENTS
from workers.environments.grid import GridKnobs
from workers.environments.grid.component import NO_MOVE
from workers.errors import ConfigError
from workers.reporting import MemoryReporter
from workers.tasks import Example, build_task
from workers.tasks.grid import moves_to_goal, parse, play, read_moves, shortest_solution
from workers.training.trainer import Trainer

CORRIDOR = "#######\n#@  $.#\n#######\n"  # three moves right
AROUND = "#####\n#   #\n#@$ #\n#  .#\n#####\n"  # push right, walk round, push down
CORNERED = "#####\n#$ .#\n# @ #\n#####\n"  # the box is in a corner off its target
ALONG_THE_WALL = "######\n#@$  #\n#    #\n#   .#\n######\n"  # the box can only slide along the top wall
OPEN = "######\n#    #\n#@$ .#\n#    #\n######\n"  # RR solves it
TWO_BOXES = "######\n#.   #\n#@$$.#\n#    #\n######\n"


def grid_task(**knobs):
    return build_task(resolve({"task": {"name": "grid", **knobs}, "eval": {"size": 20}}))


def grid(**knobs):
    return ENVIRONMENTS.get("grid")(GridKnobs(**knobs), grid_task())


def play_turns(environment, board, turns):
    episode = environment.reset(Example(prompt=board, answer=""), np.random.default_rng(0))
    return episode, [episode.step(turn) for turn in turns]


def board_after(board, moves):
    layout, state = parse(board)
    return layout.text(play(layout, state, moves).state)


# ---------------------------------------------------------------- the task


def test_the_same_seed_draws_the_same_puzzles_and_another_seed_others():
    first, second = grid_task(), grid_task()
    batch = lambda task, seed: task.train_batch(16, np.random.default_rng(seed))  # noqa: E731
    assert batch(first, 3) == batch(second, 3)
    assert batch(first, 3) != batch(first, 4)
    assert first.eval_examples() == second.eval_examples() and first.fingerprint() == second.fingerprint()
    assert grid_task(walls=2).fingerprint() != first.fingerprint()


@pytest.mark.parametrize(
    "knobs", [{}, {"size": 5, "walls": 0, "min_moves": 1, "max_moves": 4}, {"size": 7, "boxes": 2, "max_moves": 8}]
)
def test_every_drawn_puzzle_needs_exactly_its_answers_moves(knobs):
    task = grid_task(**knobs)
    examples = task.train_batch(24, np.random.default_rng(0)) + task.eval_examples()
    for example in examples:
        board, state = parse(example.prompt)
        solution = shortest_solution(board, state, limit=12)  # the plain forward search, the reference
        assert solution is not None and len(solution) == int(example.answer)
        assert task.min_moves <= len(solution) <= task.max_moves
        assert task.is_correct(example, solution)
    held_out = {e.prompt for e in task._held_out_examples}
    assert not held_out & {e.prompt for e in task.train_batch(200, np.random.default_rng(1))}


def test_the_warm_up_targets_are_shortest_solutions_of_the_easier_slice():
    task = grid_task(warmup_max_moves=3, warmup_full_share=0.0)
    for prompt, target in task.warmup_pairs(32, np.random.default_rng(0)):
        board, state = parse(prompt)
        assert 1 <= len(target) <= 3 and len(target) == len(shortest_solution(board, state, limit=12))
        assert task.is_correct(Example(prompt=prompt, answer=str(len(target))), target)


def test_breadth_first_search_finds_the_fewest_moves_on_hand_made_boards():
    assert shortest_solution(*parse(CORRIDOR), limit=10) == "RRR"
    assert shortest_solution(*parse(AROUND), limit=10) == "RURD"
    assert shortest_solution(*parse(AROUND), limit=3) is None  # none within the limit
    assert shortest_solution(*parse(CORNERED), limit=20) is None
    assert shortest_solution(*parse(ALONG_THE_WALL), limit=20) is None


def test_the_backward_search_gives_every_state_its_forward_minimum():
    board, start = parse(AROUND)
    distance = moves_to_goal(board, limit=6)
    assert distance[start] == 4
    for state, moves in distance.items():
        assert len(shortest_solution(board, state, limit=6)) == moves
    board, start = parse(ALONG_THE_WALL)
    assert start not in moves_to_goal(board, limit=20)  # an unsolvable board is never drawn


def test_a_board_reads_back_as_it_was_written():
    board = "######\n#+$  #\n# *  #\n######\n"
    layout, state = parse(board)
    assert layout.text(state) == board and layout.key(state) == "@1,1 $1,2 $2,2"
    for broken in ["#####\n#@$. \n#####\n", "######\n#@$$.#\n######\n", "#####\n#@x.#\n#####\n"]:
        with pytest.raises(ValueError):
            parse(broken)


@pytest.mark.parametrize(
    ("completion", "correct", "key"),
    [
        ("RR", True, "2"),
        ("right, right", True, "2"),
        ("r r\n", True, "2"),
        ("RRLL", True, "2"),  # the moves after the boxes are home are not played
        ("R", False, "@2,2 $2,3"),
        ("LRR", False, "@2,1 $2,2"),  # L walks into the wall: the play ends there
        ("move right", False, None),
        ("", False, None),
    ],
)
def test_the_single_turn_verifier_plays_the_completion(completion, correct, key):
    task, example = grid_task(), Example(prompt=OPEN, answer="2")
    assert task.is_correct(example, completion) == correct
    assert task.answer_key(example, completion) == key
    assert task.format_ok(example, completion) == (key is not None)


def test_knobs_that_leave_no_puzzle_are_refused():
    with pytest.raises(ConfigError, match="task.min_moves"):
        resolve({"task": {"name": "grid", "min_moves": 5, "max_moves": 3}})
    with pytest.raises(ConfigError, match="task.walls"):
        resolve({"task": {"name": "grid", "size": 5, "walls": 9}})
    with pytest.raises(ConfigError, match="eval.size"):  # 9 cells inside: 648 boards at most
        resolve({"task": {"name": "grid", "size": 5, "walls": 0}, "eval": {"size": 400}})


# ---------------------------------------------------------------- the environment


def test_an_episode_shows_the_board_after_each_turn_and_ends_solved():
    episode, (first, second) = play_turns(grid(step_penalty=0.01), OPEN, ["R\n", "R\n"])
    assert episode.opening == OPEN and episode.start_state == "@2,1 $2,2"
    assert (first.observation, first.done, first.state, first.well_formed) == (
        board_after(OPEN, "R"), False, "@2,2 $2,3", True)  # fmt: skip
    assert first.reward == pytest.approx(-0.01) and not first.solved
    assert (second.observation, second.done, second.solved, second.state) == ("", True, True, "@2,3 $2,4")
    assert second.reward == pytest.approx(1.0 + 0.1 - 0.01)


def test_a_turn_may_hold_several_moves_and_the_moves_after_solving_are_not_played():
    _, (turn,) = play_turns(grid(step_penalty=0.01), OPEN, ["RRLL\n"])
    assert turn.solved and turn.reward == pytest.approx(1.0 + 0.1 - 0.02)  # two moves tried
    assert turn.action == "RRLL"  # what was read, for the inspector


@pytest.mark.parametrize(
    ("board", "turn", "note", "state", "tried"),
    [
        (OPEN, "L\n", "L: a wall is in the way", "@2,1 $2,2", 1),
        (OPEN, "UUR\n", "U: a wall is in the way", "@1,1 $2,2", 2),  # the R after the refused U is dropped
        (TWO_BOXES, "R\n", "R: the box cannot move", "@2,1 $2,2 $2,3", 1),
    ],
)
def test_an_illegal_move_is_not_made_and_the_observation_says_so(board, turn, note, state, tried):
    _, (answer,) = play_turns(grid(step_penalty=0.01), board, [turn])
    moves = read_moves(turn)[: tried - 1]
    assert answer.observation == f"{note}\n" + board_after(board, moves)
    assert (answer.state, answer.done, answer.well_formed) == (state, False, True)
    assert answer.reward == pytest.approx(-0.01 * tried)


@pytest.mark.parametrize("turn", ["hello\n", "\n", "<move>R</move>"])
def test_a_turn_without_a_move_is_not_well_formed_and_changes_nothing(turn):
    episode, (answer,) = play_turns(grid(step_penalty=0.01), OPEN, [turn])
    assert answer.observation == f"{NO_MOVE}\n{OPEN}"
    assert (answer.well_formed, answer.done, answer.state) == (False, False, episode.start_state)
    assert answer.reward == pytest.approx(-0.01)  # charged as one move: writing nothing is never cheaper than moving


def test_a_box_pushed_into_a_corner_ends_the_episode_unless_told_to_play_on():
    corner = ["DRURUL\n"]  # up against the top wall, then left into the corner
    _, (stuck,) = play_turns(grid(step_penalty=0.01), OPEN, corner)
    assert (stuck.done, stuck.solved, stuck.observation, stuck.state) == (True, False, "", "@1,2 $1,1")
    assert stuck.reward == pytest.approx(-0.06)
    _, (going_on,) = play_turns(grid(end_at_deadlock=False), OPEN, corner)
    assert not going_on.done and going_on.observation == board_after(OPEN, "DRURUL")


def test_the_turn_limit_ends_an_unsolved_episode():
    _, turns = play_turns(grid(max_turns=2), OPEN, ["U\n", "D\n"])
    assert [(t.done, t.solved) for t in turns] == [(False, False), (True, False)]
    assert turns[1].observation == ""


def test_the_shaped_parts_count_boxes_placed_and_taken_off():
    board = "######\n#@*  #\n#  $.#\n######\n"  # R pushes the box on its target off it; DRR places the other
    environment = grid(box_reward=0.5, step_penalty=0.0)
    _, (off,) = play_turns(environment, board, ["R\n"])
    assert off.reward == pytest.approx(-0.5) and not off.done
    _, (home,) = play_turns(environment, board, ["DRR\n"])
    assert home.solved and home.reward == pytest.approx(0.5 + 1.0)


def test_a_forked_episode_plays_on_from_the_same_board_on_its_own():
    from workers.environments.episodes import forked

    environment, example = grid(max_turns=3), Example(prompt=OPEN, answer="2")
    episode = environment.reset(example, None)
    episode.step("D\n")
    fork = forked(episode, environment, example)
    assert fork.step("U\n").state == episode.start_state  # back where it began
    assert episode.step("R\n").state == "@3,2 $2,2"  # the original never moved up
    assert fork.step("RR\n").solved and episode.step("L\n").done  # each at its own third turn


def test_the_grid_environment_refuses_another_task_when_the_config_is_read():
    with pytest.raises(ConfigError, match="task.name to grid") as refused:
        small_config(environment={"name": "grid"})  # the default task: arith
    assert set(refused.value.fields) == {"environment.name"}


def test_the_warm_up_plays_a_share_of_its_solutions_as_episodes_with_the_real_boards():
    environment = grid(max_turns=3, demonstrated_turns=0.5)
    pairs = grid_task(warmup_full_share=1.0).warmup_pairs(200, np.random.default_rng(0))
    shown = environment.demonstrations(pairs, np.random.default_rng(0))
    episodes = 0
    for (prompt, solution), (same_prompt, target) in zip(pairs, shown):
        assert same_prompt == prompt
        if target == solution:
            continue
        episodes += 1
        episode, rest, turns = environment.reset(Example(prompt=prompt, answer=""), None), target, []
        while "\n" in rest:  # each turn but the last: its moves, the newline, then the board it leaves
            turn, rest = rest.split("\n", 1)
            answer = episode.step(turn + "\n")
            assert rest.startswith(answer.observation) and not answer.done
            rest, turns = rest[len(answer.observation) :], [*turns, turn]
        assert episode.step(rest).solved and "".join([*turns, rest]) == solution
        assert 2 <= len(turns) + 1 <= 3
    assert 0.35 < episodes / len(pairs) < 0.65  # half (every solution has two moves or more)
    assert grid(demonstrated_turns=0.0).demonstrations(pairs, np.random.default_rng(0)) == pairs


# ---------------------------------------------------------------- in a batch, and what trains


def grid_run():
    cfg = small_config(task={"name": "grid", "size": 5, "walls": 0, "min_moves": 2, "max_moves": 4},
                       environment={"name": "grid", "max_turns": 3, "max_episode_tokens": 96},
                       model={"warmup_steps": 0}, rollout={"prompts_per_step": 2, "group_size": 2,
                       "max_new_tokens": 8})  # fmt: skip
    return Trainer(cfg, MemoryReporter())


def first_move_then_the_rest(question, row, turn):
    """Turn 0: a shortest solution's first move and a newline; turn 1: the rest, ended by the end-of-turn token."""
    solution = shortest_solution(*parse(question), limit=8)
    return (solution[0] + "\n", False) if turn == 0 else (solution[1:], True)


def test_a_grid_episode_in_the_batch_keeps_its_turns_boards_and_state_keys():
    trainer = grid_run()
    policy = trainer.policy
    batch = trainer.collector.collect(1, policy, ScriptedTurns(policy, first_move_then_the_rest), 0).batch
    encode = lambda text: policy.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    for row, episode in enumerate(batch.episodes):
        prompt = batch.example_of(row).prompt
        solution = shortest_solution(*parse(prompt), limit=8)
        observation = board_after(prompt, solution[0])
        tokens = batch.tokens[row, : int(batch.mask[row].sum())].tolist()
        assert tokens == encode(solution[0] + "\n") + encode(observation) + encode(solution[1:]) + [policy.eos_id]
        first, second = episode.turns
        assert (first.end, first.observation_end) == (2, 2 + len(observation))
        assert first.state == parse(prompt)[0].key(parse(observation)[1]) and episode.start_state != first.state
        assert episode.solved and episode.reward == pytest.approx(1.0 + 0.1)  # no move penalty by default
    assert batch.correct.all()


def test_no_gradient_reaches_the_logits_of_a_grid_observation():
    trainer = grid_run()
    batch = trainer.collector.collect(1, trainer.policy, ScriptedTurns(trainer.policy, first_move_then_the_rest), 0)
    batch = batch.batch
    batch.rewards = torch.tensor([1.0, 0.0] * (batch.num_samples // 2))  # a spread, so every turn has an advantage
    assert_observations_get_no_gradient(trainer, batch)
