"""Supervised fine-tuning with ``trl``'s SFTTrainer and a LoRA adapter from ``peft``.

The shape of the SFT scripts in Determined's examples (``llm-finetuning``): the
hyperparameters hold the trainer's arguments (``training_args``, an ``SFTConfig`` here) and
the adapter's (``lora``); ``DetCallback`` reports metrics, stores every save (the adapter's
weights, not the frozen base model) and resumes after a pause. The base model is the tiny
GPT-2 of ``tiny_lm.py``, freshly initialized: the point is the plumbing, not the answers.
The data are prompt/completion pairs (``"37+48="`` / ``"85"``), so the loss is computed on
the completions only.

    python3 -m determined.launch.torch_distributed python3 sft_lora.py
"""

import logging

import datasets
import peft
import tiny_lm
import torch
import transformers
from trl import SFTConfig, SFTTrainer

import determined as det
from determined.transformers import DetCallback

logger = logging.getLogger("sft_lora")


def load_dataset(count: int, seed: int) -> datasets.Dataset:
    pairs = tiny_lm.sums(count, seed)
    return datasets.Dataset.from_dict(
        {"prompt": [p for p, _ in pairs], "completion": [c for _, c in pairs]}
    )


def main(training_args: SFTConfig, det_callback: DetCallback, hparams: dict) -> None:
    tokenizer = tiny_lm.build_tokenizer()
    model = tiny_lm.build_model(tokenizer, seed=training_args.seed)
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=load_dataset(hparams["train_examples"], 1),
        eval_dataset=load_dataset(hparams["eval_examples"], 2),
        processing_class=tokenizer,
        peft_config=peft.LoraConfig(task_type="CAUSAL_LM", **hparams["lora"]),
    )
    trainer.model.print_trainable_parameters()
    trainer.add_callback(det_callback)
    if training_args.resume_from_checkpoint:
        logger.info(f"resuming from {training_args.resume_from_checkpoint}")
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    logger.info(f"trained to step {trainer.state.global_step}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    transformers.utils.logging.set_verbosity_warning()
    datasets.disable_progress_bars()
    torch.set_num_threads(1)
    info = det.get_cluster_info()
    assert info is not None, "run this script on a cluster: det experiment create sft_lora.yaml ."
    hparams = info.trial.hparams
    training_args = SFTConfig(**hparams["training_args"])
    distributed = det.core.DistributedContext.from_torch_distributed()
    with det.core.init(distributed=distributed) as core_context:
        det_callback = DetCallback(
            core_context, training_args, user_data={"base_model": "tiny-gpt2", "adapter": "lora"}
        )
        main(training_args, det_callback, hparams)
