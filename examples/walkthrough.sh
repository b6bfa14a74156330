#!/usr/bin/env bash
# The README's walk-through as one script: every command the README shows, in the same order,
# with every file and id it uses created on the way. CI runs it against a started server
# (test/docs/walkthrough.test.ts), so the README's commands keep working.
#
#   KEY=atr_ws_… examples/walkthrough.sh                 # the key the first `npm start` printed
#   KEY=atr_ws_… A=http://127.0.0.1:3000 examples/walkthrough.sh
#
# Needs bash, curl, node (for JSON) and zip. Works in a temporary directory it removes after.
set -euo pipefail

: "${KEY:?set KEY to a workspace owner key of wsp_demo (printed by the first npm start)}"
export A=${A:-http://localhost:3000}
H="x-service-api-key: $KEY"
# A value out of a JSON document on stdin, by its dotted path (`data.project.id`); fails when absent.
json() { node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>{let v=JSON.parse(s);for(const k of process.argv[1].split("."))v=v?.[k];if(v===undefined)process.exit(1);console.log(typeof v==="string"?v:JSON.stringify(v))})' "$1"; }

# Runs one curl command, prints its body and stops the script unless the HTTP status is $1.
# The README shows the same commands without this prefix.
status() {
  local want=$1 out code command
  shift
  command=$*
  command=${command//$KEY/\$KEY} # never print the key
  out=$("$@" -w '\n%{http_code}') || { echo "walkthrough: curl failed: $command" >&2; return 1; }
  code=${out##*$'\n'}
  printf '%s\n' "${out%$'\n'*}"
  if [[ $code != "$want" ]]; then
    echo "walkthrough: expected HTTP $want, got $code: $command" >&2
    return 1
  fi
}
ok() { status 200 "$@"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

echo '== agents'
ok curl -s "$A/v1/workspace/wsp_demo/agents?limit=10&offset=0" -H "$H"

echo '== projects'
PROJECT=$(status 201 curl -s $A/v1/projects -H "$H" -H 'content-type: application/json' \
  -d '{"name":"Launch","description":"Q3 launch","instructions":"Answer in French.","color":"#0EA5E9","icon":"rocket"}' | json data.project.id)
ok curl -s $A/v1/projects -H "$H"

echo '== errors'
status 400 curl -s $A/v1/projects -H "$H" -H 'content-type: application/json' -d '{"name":""}'

echo '== chat'
CHAT_ID=$(ok curl -s $A/v1/chat -H "$H" -H 'content-type: application/json' \
  -d '{"agentId":"agt_demo_assistant","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"Hello there"}]}]}' | json chatId)
ok curl -s -N $A/v1/chat -H "$H" -H 'content-type: application/json' \
  -d "{\"agentId\":\"agt_demo_assistant\",\"chatId\":\"$CHAT_ID\",\"stream\":true,\"messages\":[{\"id\":\"m2\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"And again\"}]}]}"

echo '== chats'
ok curl -s "$A/v1/chats?limit=20" -H "$H"
ok curl -s "$A/v1/chats/$CHAT_ID/messages?limit=100" -H "$H"
ok curl -s -X PATCH $A/v1/chats/$CHAT_ID -H "$H" -H 'content-type: application/json' -d '{"title":"Launch plan"}'
ok curl -s -X POST $A/v1/chat/$CHAT_ID/stop -H "$H"
status 204 curl -s -N $A/v1/chat/$CHAT_ID/stream -H "$H"
ok curl -s -X DELETE $A/v1/chats/$CHAT_ID -H "$H"

echo '== agent runs'
RUN_ID=$(ok curl -s $A/v1/agents/agt_demo_assistant/runs -H "$H" -H 'content-type: application/json' -d '{"message":"Summarise the plan"}' | json data.id)
ok curl -s "$A/v1/agents/agt_demo_assistant/runs?limit=20" -H "$H"
ok curl -s $A/v1/agents/agt_demo_assistant/runs/$RUN_ID -H "$H"

echo '== project files'
printf '# Spec\nHello\n' > spec.md
UPLOAD_URL=$(ok curl -s $A/v1/projects/$PROJECT/files/upload -H "$H" -H 'content-type: application/json' \
  -d "{\"filename\":\"spec.md\",\"contentType\":\"text/markdown\",\"sizeBytes\":$(wc -c < spec.md),\"folder\":\"docs/specs\"}" | json data.uploadUrl)
ok curl -s -X PUT "$UPLOAD_URL" -H 'content-type: text/markdown' --data-binary @spec.md
ok curl -s -X POST $A/v1/projects/$PROJECT/files/sync -H "$H"
ok curl -s "$A/v1/projects/$PROJECT/files?tree=true" -H "$H"
FILE_ID=$(ok curl -s $A/v1/projects/$PROJECT/files -H "$H" | json data.files.0.id)
ok curl -s $A/v1/projects/$PROJECT/files/$FILE_ID/download -H "$H"
ok curl -s $A/v1/projects/$PROJECT/index -H "$H"
ok curl -s "$A/v1/projects/$PROJECT/search?q=hello+spec&limit=5" -H "$H"
status 202 curl -s -X POST $A/v1/projects/$PROJECT/index/rebuild -H "$H"
ok curl -s $A/v1/chat -H "$H" -H 'content-type: application/json' \
  -d "{\"agentId\":\"agt_demo_assistant\",\"projectId\":\"$PROJECT\",\"messages\":[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"What does the spec say?\"}]}]}"
ok curl -s -X DELETE $A/v1/projects/$PROJECT/files/$FILE_ID -H "$H"

echo '== skills'
mkdir -p pdf-tools
printf -- '---\nname: pdf-tools\ndescription: Read and split PDF files\n---\n# PDF tools\nUse pdftotext.\n' > pdf-tools/SKILL.md
zip -qr skills.zip pdf-tools
printf -- '---\nname: release-notes\ndescription: Write release notes\n---\nList changes by kind.\n' > release-notes.md
printf 'not a zip archive\n' > notes.txt
ok curl -s $A/v1/workspace/wsp_demo/skills/bulk-upload -H "$H" \
  -F files=@skills.zip -F files=@release-notes.md -F visibility=workspace
status 207 curl -s $A/v1/workspace/wsp_demo/skills/bulk-upload -H "$H" -F files=@release-notes.md -F 'files=@notes.txt;filename=notes.zip'
ok curl -s "$A/v1/workspace/wsp_demo/skills?limit=10" -H "$H"
SKILL_ID=$(ok curl -s $A/v1/workspace/wsp_demo/skills/bulk-upload -H "$H" -F files=@skills.zip -F mode=replace | json data.updated.0.id)
ok curl -s $A/v1/skills/$SKILL_ID -H "$H"
ok curl -s -X DELETE $A/v1/skills/$SKILL_ID -H "$H"

echo '== managing the workspace'
ok curl -s $A/v1/me -H "$H"
AGENT_ID=$(status 201 curl -s $A/v1/workspace/wsp_demo/agents -H "$H" -H 'content-type: application/json' \
  -d '{"title":"Support","instructions":"Answer briefly.","tools":[{"type":"mcp","name":"crm","url":"https://mcp.example.com/","headers":{"authorization":"Bearer secret"}}]}' | json data.agent.id)
ok curl -s $A/v1/agents/$AGENT_ID -H "$H"
ok curl -s -X PATCH $A/v1/agents/$AGENT_ID -H "$H" -H 'content-type: application/merge-patch+json' -d '{"category":"help","image":null}'
ok curl -s -X DELETE $A/v1/agents/$AGENT_ID -H "$H"
status 409 curl -s -X PATCH $A/v1/agents/agt_demo_assistant -H "$H" -H 'content-type: application/json' -d '{"title":"x"}'
ok curl -s $A/v1/projects/$PROJECT -H "$H"
ok curl -s -X PATCH $A/v1/projects/$PROJECT -H "$H" -H 'content-type: application/json' -d '{"archived":true}'
ok curl -s "$A/v1/projects?archived=true" -H "$H"
ok curl -s -X DELETE $A/v1/projects/$PROJECT -H "$H"
EXPIRES=$(node -p 'new Date(Date.now() + 90 * 864e5).toISOString()')
KEY_ID=$(status 201 curl -s $A/v1/workspace/wsp_demo/api-keys -H "$H" -H 'content-type: application/json' -d '{"name":"ci","expiresAt":"'$EXPIRES'"}' | json data.apiKey.id)
ok curl -s $A/v1/workspace/wsp_demo/api-keys -H "$H"
ok curl -s -X DELETE $A/v1/api-keys/$KEY_ID -H "$H"
status 201 curl -s $A/v1/workspace/wsp_demo/session-tokens -H "$H" -H 'content-type: application/json' \
  -d '{"userId":"usr_demo_owner","agentIds":["agt_demo_assistant"],"expiresInSeconds":3600}'
ok curl -s $A/v1/workspace/wsp_demo/models -H "$H"
ok curl -s $A/v1/workspace/wsp_demo/usage -H "$H"

echo '== walkthrough: every step answered as expected'
