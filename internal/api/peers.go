package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/store"
)

// PeerLister answers GET /api/v1/peers and DELETE /api/v1/peers/{id}.
type PeerLister interface {
	ListPeers(ctx context.Context) (apiv1.PeerList, error)
	// ForgetPeer drops a departed peer: store.ErrNotFound for an unknown
	// one, store.ErrPeerRecent for one that is live, seen recently, or
	// the answering orchestrator itself.
	ForgetPeer(ctx context.Context, id string) error
}

// listPeers answers GET /api/v1/peers with the lister's list.
func (s *Server) listPeers(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Peers == nil {
		writeError(w, http.StatusServiceUnavailable, "the peer list is not available on this orchestrator")
		return
	}
	list, err := s.cfg.Peers.ListPeers(r.Context())
	if err != nil {
		s.storeError(w, "list peers", err)
		return
	}
	if list.Peers == nil {
		list.Peers = []apiv1.Peer{}
	}
	writeJSON(w, http.StatusOK, list)
}

// forgetPeer answers DELETE /api/v1/peers/{id}: 204 once the departed
// peer is dropped, 404 for an unknown one, 409 for one that is not gone.
func (s *Server) forgetPeer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "peer:"+id, "")
	if s.cfg.Peers == nil {
		writeError(w, http.StatusServiceUnavailable, "peers are not available on this orchestrator")
		return
	}
	err := s.cfg.Peers.ForgetPeer(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("peer %q is not known", id))
	case errors.Is(err, store.ErrPeerRecent), errors.Is(err, store.ErrPeerHoldsJobs):
		writeError(w, http.StatusConflict, fmt.Sprintf("peer %q: %v", id, err))
	case err != nil:
		s.storeError(w, fmt.Sprintf("peer %q", id), err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// revokePeer answers POST /api/v1/peers/{id}/revoke: worker id's
// certificate is refused by every coordinator from now on (at once where
// it connects or renews, within a heartbeat where it is connected), and
// it leaves the peer list. 409 on a standalone orchestrator and for an id
// that is an orchestrator's. Revoking again is not an error.
func (s *Server) revokePeer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	audited(r, "peer:"+id, "")
	if s.cfg.Peer == nil {
		writeError(w, http.StatusConflict, "only a cluster coordinator has workers to revoke")
		return
	}
	if err := validNodeID(id); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	p := principal(r)
	err := s.db.RevokeNode(r.Context(), id, p.Type+":"+p.ID)
	switch {
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, fmt.Sprintf("peer %q is an orchestrator, not a worker: stop it instead", id))
	case err != nil:
		s.storeError(w, fmt.Sprintf("revoke peer %q", id), err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "revoked": true})
	}
}
