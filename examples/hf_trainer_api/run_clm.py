"""Causal language modeling with the Hugging Face Trainer and Determined's ``DetCallback``.

The shape of Determined's ``hf_language_modeling/run_clm.py``: the command line holds the
``TrainingArguments`` (``--max_steps``, ``--eval_steps``...), the hyperparameters'
``training_arguments`` section is appended to it (so a search can vary ``learning_rate``),
and ``DetCallback`` reports metrics, saves checkpoints and resumes. The model is a tiny
GPT-2 built from a config and the data are generated sums (``tiny_lm.py``), so it runs on
CPUs with nothing to download.

    python3 -m determined.launch.torch_distributed python3 run_clm.py --max_steps 100 ...
"""

import dataclasses
import logging
import sys
from typing import Any

import tiny_lm
import torch
import transformers
from transformers import HfArgumentParser, Trainer, TrainingArguments

import determined as det
from determined.transformers import DetCallback

logger = logging.getLogger("run_clm")


@dataclasses.dataclass
class ModelArguments:
    """The model and data: sizes only, everything is built here."""

    n_layer: int = 2
    n_embd: int = 32
    n_head: int = 2
    seq_length: int = 16
    train_examples: int = 4000
    eval_examples: int = 128
    torch_threads: int = 1


def dict2args(hparams: dict[str, Any]) -> list[str]:
    out = []
    for key, value in hparams.items():
        out += [f"--{key}", str(value)]
    return out


def parse_input_arguments(hparams: dict[str, Any]) -> tuple[ModelArguments, TrainingArguments]:
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    args = sys.argv[1:] + dict2args(hparams.get("training_arguments", {}))
    model_args, training_args = parser.parse_args_into_dataclasses(args, look_for_args_file=False)
    return model_args, training_args


def main(
    det_callback: DetCallback, model_args: ModelArguments, training_args: TrainingArguments
) -> None:
    tokenizer = tiny_lm.build_tokenizer()
    model = tiny_lm.build_model(
        tokenizer,
        n_layer=model_args.n_layer,
        n_embd=model_args.n_embd,
        n_head=model_args.n_head,
        n_positions=2 * model_args.seq_length,
        seed=training_args.seed,
    )
    train = tiny_lm.SumsDataset(tokenizer, model_args.train_examples, 1, model_args.seq_length)
    evaluation = tiny_lm.SumsDataset(tokenizer, model_args.eval_examples, 2, model_args.seq_length)
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=evaluation,
        processing_class=tokenizer,
    )
    trainer.add_callback(det_callback)
    if training_args.resume_from_checkpoint:
        logger.info(f"resuming from {training_args.resume_from_checkpoint}")
    # DetCallback set resume_from_checkpoint; the Trainer reads it only from this argument.
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    logger.info(f"trained to step {trainer.state.global_step}: {result.metrics}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    transformers.utils.logging.set_verbosity_warning()
    info = det.get_cluster_info()
    assert info is not None, "run this script on a cluster: det experiment create const.yaml ."
    model_args, training_args = parse_input_arguments(info.trial.hparams)
    # Tiny models train fastest on one thread per worker; more only contend for the cores.
    torch.set_num_threads(model_args.torch_threads)
    if training_args.deepspeed:
        distributed = det.core.DistributedContext.from_deepspeed()
    else:
        distributed = det.core.DistributedContext.from_torch_distributed()
    with det.core.init(distributed=distributed) as core_context:
        user_data = {
            "finetuned_from": None,
            "tasks": "language-modeling",
            "dataset": "sums",
            "tags": ["language-modeling", "tiny"],
        }
        det_callback = DetCallback(core_context, training_args, user_data=user_data)
        main(det_callback, model_args, training_args)
