#!/usr/bin/env bash
# The tracker's daily job: measure today, export the day's document, commit it, build the site.
# The GitHub Actions workflow (tracker.yml) runs this script; on any other machine, cron it from
# the root of the git repository that keeps the data (docs/tracker.md):
#
#   17 6 * * *  cd /srv/tracker && examples/tracker/daily.sh >> daily.log 2>&1
#
# Settings (environment): PLAN, CAMPAIGN, STORE, SITE, ORIGIN, and PUSH=1 to push the commit.
set -euo pipefail

PLAN=${PLAN:-$(dirname "$0")/plan.toml}
CAMPAIGN=${CAMPAIGN:-tracker}
TODAY=$(date -u +%F)
# Each day's raw rows go to a store of their own, beside the repository's data and never in git
# (runs/ is uploaded as a build artifact by the workflow): a lost store loses one day at most.
STORE=${STORE:-runs/$TODAY.sqlite}
SITE=${SITE:-public}
ORIGIN=${ORIGIN:-a scheduled job (cron)}

mkdir -p "$(dirname "$STORE")"
# Today's campaign is one slot, due now; a second run the same day finds it done and adds nothing.
if ! gpubench campaign status "$CAMPAIGN" --store "$STORE" > /dev/null 2>&1; then
  gpubench campaign create "$PLAN" --name "$CAMPAIGN" --every 1d --for 1d --grace 12h \
    --store "$STORE"
fi
gpubench campaign tick "$CAMPAIGN" --store "$STORE"
gpubench campaign export "$CAMPAIGN" --store "$STORE" -o . --origin "$ORIGIN"

git add data
if git diff --cached --quiet; then
  echo "no new document to commit"
else
  git commit -q -m "tracker: $TODAY"
  if [ "${PUSH:-0}" = 1 ]; then git push -q; fi
fi
gpubench site build . -o "$SITE"
