"""The QA study (chapter 06): data, grading, one question → one record, runs, scores, AUROC.

- `data`: TruthfulQA and TriviaQA loaders;
- `grading`: is an answer right?;
- `engine`: one question → one record (every expensive pass once), resumable runs;
- `study`: the chapter's runs through the results store, score tables;
- `scores`: THE registry of uncertainty scores (name, label, orientation, fields, citation);
- `auroc`: AUROC, PRR and their bootstrap intervals;
- `headline`: mean-over-models AUROC and the C6/C7/C9 measurements;
- `transfer`: cross-model transfer of a raw threshold (C9);
- `multiple_choice`: TruthfulQA MC1/MC2 by answer likelihood.
"""
