# Commits every file of the current folder as the one "base" commit of a
# swe-mini repository, with a fixed author, committer and date, so its hash
# is the same on every machine (tasks.jsonl records it), and prints the hash.
# scripts/swe-images.sh runs it inside a task image (sh -ec), and
# scripts/swe-repos.sh in a checkout on this machine.
export GIT_AUTHOR_NAME=swe-mini GIT_AUTHOR_EMAIL=swe-mini@localhost
export GIT_COMMITTER_NAME=swe-mini GIT_COMMITTER_EMAIL=swe-mini@localhost
export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"
git init -q -b main .
git config user.name swe-mini && git config user.email swe-mini@localhost
git add -A && git commit -q -m "base"
git rev-parse HEAD
