"""What the data is: the dataset card's schema, the dump formats, row rules, categories, model identity."""
