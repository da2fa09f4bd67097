package jsonrpc

import "bytes"

// An MCP server asks its client for things: the client's model to write
// (sampling/createMessage), the user to fill a form (elicitation/create),
// the client's folders (roots/list). The client answers in a JSON-RPC
// response it POSTs (streamable HTTP until 2025-11-25) or, in 2026-07-28's
// multi round-trip requests, in params.inputResponses of the call it
// retries, keyed by ids the server chose. Neither says which request it
// answers: the answer's shape does, as servers read it (the TypeScript
// SDK's inputResponse: an action member is an elicitation's, a roots
// array a roots listing, role and content a sampling result). content
// alone tells nothing: an elicitation's answer has it too; a sampling
// result always has its role and model.

// ServerRequests are the requests of a server whose answers a client's
// message may carry: bit i of Request.Answers stands for ServerRequests[i].
var ServerRequests = [...]string{"sampling/createMessage", "elicitation/create", "roots/list"}

// Bits of Request.Answers.
const (
	AnswersSampling uint8 = 1 << iota
	AnswersElicitation
	AnswersRoots

	// AnswersAny: an answer of any of them.
	AnswersAny = AnswersSampling | AnswersElicitation | AnswersRoots
)

// answerWrapped marks a member that wraps an answer instead of being one
// ({"method": ..., "result": ...}, as some peers send inputResponses).
const answerWrapped uint8 = 1 << 7

// answerKind is what an answer holding the member key is an answer to,
// matched in any case: Go SDKs decode answers into structs, which match
// keys case-insensitively.
func answerKind(key []byte) uint8 {
	switch {
	case bytes.EqualFold(key, []byte("action")):
		return AnswersElicitation
	case bytes.EqualFold(key, []byte("roots")):
		return AnswersRoots
	case bytes.EqualFold(key, []byte("role")), bytes.EqualFold(key, []byte("model")):
		return AnswersSampling
	case bytes.EqualFold(key, []byte("method")), bytes.EqualFold(key, []byte("result")):
		return answerWrapped
	}
	return 0
}

// answersOfResult is what the result of a response answers, by its
// members: nothing for a result of none of these shapes (a ping's {}).
// result is strict JSON, read already.
func answersOfResult(result []byte) uint8 {
	if len(result) == 0 || result[0] != '{' {
		return 0
	}
	var a uint8
	if WalkStrict(result, 1, func(_ int, key []byte, _, _ int) { a |= answerKind(key) }) != nil {
		return AnswersAny
	}
	return a &^ answerWrapped
}

// answersOfInputResponses is what the entries of params.inputResponses
// answer. An entry that is no object, wraps its answer, or has none of
// the members that tell is taken for an answer to any request: some
// server may read it as one.
func answersOfInputResponses(doc []byte) uint8 {
	var all, entry uint8
	err := WalkStrict(doc, 2, func(depth int, key []byte, start, _ int) {
		if depth == 2 {
			entry |= answerKind(key)
			return
		}
		if doc[start] != '{' || entry == 0 || entry&answerWrapped != 0 {
			entry = AnswersAny
		}
		all |= entry
		entry = 0
	})
	if err != nil {
		return AnswersAny
	}
	return all
}
