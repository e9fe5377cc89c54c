"""The sentences the `word-problems` task tells its stories with (plain data: the task's knobs count problems from
them without importing numpy). {who} is the owner, {n} a number, {things} what is counted, {other} someone else."""

NAMES = ["Mia", "Noah", "Liam", "Emma", "Ava", "Lucas", "Sofia", "Omar", "Zoe", "Ravi", "Lena", "Kofi"]
THINGS = ["marbles", "apples", "stickers", "pencils", "cookies", "stamps", "shells", "books", "coins", "cards"]
STARTS = ["{who} has {n} {things}.", "There are {n} {things} in {who}'s bag.", "{who} starts with {n} {things}."]
EVENTS = {
    "+": ["{who} buys {n} more {things}.", "{other} gives {who} {n} {things}.", "{who} finds {n} more {things}."],
    "-": ["{who} gives {n} {things} to {other}.", "{who} loses {n} {things}.", "{who} uses {n} of the {things}."],
    "*": ["{who} ends up with {n} times as many {things} as before.", "The number of {who}'s {things} grows {n}-fold."],
    "/": ["{who} shares the {things} equally among {n} friends and keeps one share.",
          "{who} splits the {things} into {n} equal piles and keeps one pile."],
}  # fmt: skip
QUESTIONS = ["How many {things} does {who} have now?", "How many {things} are left with {who} at the end?"]
DISTRACTORS = ["{other} has {n} {other_things}.", "{other} is {n} years old.",
               "The shop sells {n} kinds of {other_things}."]  # fmt: skip
