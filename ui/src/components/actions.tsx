import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * An operator action (admin keys only): a button, a confirmation that says what will happen and to
 * how many jobs, then the API call. Pages describe their actions (queue-actions.ts, job-actions.ts,
 * group-actions.ts, schedule-actions.ts); this runs them.
 */
export interface Action {
  /** The button's text: "Pause". */
  label: string;
  /** The button's accessible name and the dialog's title, naming the target: "Pause queue emails". */
  name: string;
  /** What will happen, with how many jobs. */
  consequence: string;
  /** The confirming button: "Pause emails". */
  confirm: string;
  danger?: boolean;
  /** Why it cannot be done now, if it cannot (shown as the button's title; the button is disabled). */
  unavailable?: string;
  /** Calls the API; answers what happened, for the status line. */
  run: () => Promise<string>;
}

/**
 * Runs actions: a button for each, the confirmation, and a status line saying what happened. Most
 * pages want all three together (ActionBar); a table with an action per row (a queue's groups)
 * places the buttons in its rows and the status line and dialog once, beside the table.
 */
export function useActions(onDone: () => void) {
  const [asking, setAsking] = useState<{ action: Action; from: HTMLButtonElement } | undefined>();
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string } | undefined>();

  const finish = async (go: boolean) => {
    const current = asking;
    setAsking(undefined);
    current?.from.focus();
    if (!go || !current) return;
    try {
      setOutcome({ ok: true, text: await current.action.run() });
    } catch (err) {
      setOutcome({ ok: false, text: `${current.action.name} failed: ${(err as Error).message}` });
    }
    onDone();
  };

  return {
    button: (action: Action) => (
      <button
        key={action.name}
        type="button"
        class={action.danger ? 'danger' : undefined}
        aria-label={action.name}
        title={action.unavailable ?? action.name}
        disabled={action.unavailable !== undefined}
        onClick={(e) => setAsking({ action, from: e.currentTarget })}
      >
        {action.label}
      </button>
    ),
    status: (
      <p class={outcome?.ok === false ? 'outcome error' : 'outcome'} role="status">
        {outcome?.text}
      </p>
    ),
    dialog: asking && <Confirm action={asking.action} onClose={finish} />,
  };
}

export function ActionBar({ actions, onDone }: { actions: Action[]; onDone: () => void }) {
  const run = useActions(onDone);
  return (
    <div class="actions">
      <div class="buttons">{actions.map(run.button)}</div>
      {run.status}
      {run.dialog}
    </div>
  );
}

function Confirm({ action, onClose }: { action: Action; onClose: (go: boolean) => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    dialog.current?.showModal();
  }, []);
  // Close first: while the dialog is modal, the rest of the page is inert and cannot take focus back.
  const close = (go: boolean) => {
    dialog.current?.close();
    onClose(go);
  };
  return (
    <dialog
      ref={dialog}
      class="confirm"
      aria-labelledby="confirm-title"
      aria-describedby="confirm-text"
      onCancel={(e) => {
        e.preventDefault();
        close(false);
      }}
    >
      <h2 id="confirm-title">{action.name}?</h2>
      <p id="confirm-text">{action.consequence}</p>
      <div class="buttons">
        <button type="button" onClick={() => close(false)}>
          Back
        </button>
        <button type="button" class={action.danger ? 'danger' : 'primary'} onClick={() => close(true)}>
          {action.confirm}
        </button>
      </div>
    </dialog>
  );
}
