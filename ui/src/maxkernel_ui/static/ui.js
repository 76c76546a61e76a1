// maxkernel ui: live fragments over server-sent events, and sortable tables. No build step, no framework.
"use strict";

function keepOpenPrompt(fresh, region) {
  // A question the person is answering stays as it is (their typing is not lost) while it is the same one.
  const old = region.querySelector("[data-prompt]");
  const now = fresh.querySelector("[data-prompt]");
  if (old && now && old.dataset.prompt === now.dataset.prompt) now.replaceWith(old);
}

function live(region) {
  let version = region.dataset.version;
  const source = new EventSource(region.dataset.events);
  source.onmessage = async (event) => {
    if (event.data === version) return;
    version = event.data;
    const reply = await fetch(region.dataset.live, {credentials: "same-origin"});
    if (!reply.ok) return;
    const fresh = document.createElement("div");
    fresh.innerHTML = await reply.text();  // server-rendered, every value escaped there
    keepOpenPrompt(fresh, region);
    region.replaceChildren(...fresh.childNodes);
    region.dataset.version = version;
    sortable(region);
    document.dispatchEvent(new CustomEvent("maxkernel:updated", {detail: version}));
  };
}

function sortable(root) {
  root.querySelectorAll("table.sortable").forEach((table) => {
    table.querySelectorAll("thead th").forEach((th, col) => {
      th.title = "sort";
      th.onclick = () => {
        const body = table.tBodies[0];
        const down = th.dataset.dir !== "down";
        th.dataset.dir = down ? "down" : "up";
        const key = (row) => {
          const cell = row.cells[col];
          const text = cell ? (cell.dataset.sort ?? cell.textContent.trim()) : "";
          const number = parseFloat(text.replace(/,/g, ""));
          return Number.isNaN(number) ? text : number;
        };
        const rows = [...body.rows].sort((a, b) => {
          const x = key(a), y = key(b);
          const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return down ? order : -order;
        });
        body.replaceChildren(...rows);
      };
    });
  });
}

document.querySelectorAll("[data-live]").forEach(live);
sortable(document);
