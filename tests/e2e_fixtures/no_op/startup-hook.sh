# Runs before the entrypoint in every task; the trial checks that it did.
touch startup-hook-ran
