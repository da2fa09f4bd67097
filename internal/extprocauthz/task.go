package extprocauthz

import "encoding/json"

// taskID is the id of the task a JSON-RPC answer created: MCP's
// CreateTaskResult (result.task.taskId, MCP 2025-11-25), A2A 0.3's Task
// result (result.kind "task", result.id) or A2A 1.0's (result.task.id).
// "" when the answer created none or is not one JSON-RPC result.
func taskID(body []byte) string {
	var msg struct {
		Result *struct {
			Kind string `json:"kind"`
			ID   string `json:"id"`
			Task *struct {
				TaskID string `json:"taskId"`
				ID     string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Result == nil {
		return ""
	}
	r := msg.Result
	switch {
	case r.Task != nil && r.Task.TaskID != "":
		return r.Task.TaskID
	case r.Task != nil && r.Task.ID != "":
		return r.Task.ID
	case r.Kind == "task":
		return r.ID
	}
	return ""
}
